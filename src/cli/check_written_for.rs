//! `check`'s comparison of each running server with the one its contracts were written for
//! (`written_for:`, which every file of the contract library records): a newer server may have
//! changed what a tool does without changing its definition, so a reviewer should look again.

use std::collections::BTreeMap;

use rmcp::model::Implementation;

use crate::contract::ContractSet;

/// One warning per upstream whose server reports another name or version than its contract file
/// was written for.
pub fn warnings(
    contracts: &ContractSet,
    servers: &BTreeMap<String, Implementation>,
) -> Vec<String> {
    let mut warnings = Vec::new();
    for (upstream, written_for) in &contracts.written_for {
        let Some(running) = servers.get(upstream) else {
            continue;
        };
        let expected = &written_for.server;
        if running.name != expected.name || running.version != expected.version {
            warnings.push(format!(
                "upstream `{upstream}` runs {} {}, but its contracts were written for {} {} ({}): \
                 review them against this version (the pins say whether tool definitions changed), \
                 or install {}",
                running.name,
                running.version,
                expected.name,
                expected.version,
                written_for.package,
                written_for.package,
            ));
        }
    }
    warnings
}
