//! `check`'s warnings about what no one can use: a declared tool, resource or prompt that no
//! caller and no OAuth role may reach (a glob that misses, a caller left out), and the
//! environment that `check` did not need but `serve` will.

use crate::config::Config;
use crate::config::glob::glob_match;
use crate::contract::ContractSet;

/// The allow-lists of every caller and every OAuth role: who could reach what.
struct Grants<'a> {
    tools: Vec<&'a str>,
    resources: Vec<&'a str>,
    prompts: Vec<&'a str>,
}

impl<'a> Grants<'a> {
    fn of(config: &'a Config) -> Grants<'a> {
        let mut grants = Grants {
            tools: vec![],
            resources: vec![],
            prompts: vec![],
        };
        let roles = config.oauth.iter().flat_map(|o| o.roles.values());
        let lists = config
            .callers
            .iter()
            .map(|c| (&c.tools, &c.resources, &c.prompts))
            .chain(roles.map(|r| (&r.tools, &r.resources, &r.prompts)));
        for (tools, resources, prompts) in lists {
            grants.tools.extend(tools.iter().map(String::as_str));
            grants
                .resources
                .extend(resources.iter().map(String::as_str));
            grants.prompts.extend(prompts.iter().map(String::as_str));
        }
        grants
    }
}

/// One warning per declared tool, resource and prompt that no caller or role may use.
pub fn unreachable(config: &Config, contracts: &ContractSet) -> Vec<String> {
    let grants = Grants::of(config);
    let config_file = config.source.display();
    let mut warnings = Vec::new();
    for (name, contract) in &contracts.tools {
        if !grants.tools.iter().any(|g| glob_match(g, name)) {
            warnings.push(format!(
                "tool `{name}` ({}) is reachable by no caller: no `tools:` glob of a caller or role in {config_file} matches it",
                contract.file.display()
            ));
        }
    }
    for resource in &contracts.resources {
        let declared = resource.declared();
        // A declared glob is reachable through a caller's pattern that it covers as well as
        // through one that covers it (either way some URI is both declared and allowed).
        if !grants
            .resources
            .iter()
            .any(|g| glob_match(g, declared) || glob_match(declared, g))
        {
            warnings.push(format!(
                "resource `{declared}` ({}) is reachable by no caller: no `resources:` glob of a caller or role in {config_file} matches it",
                resource.file.display()
            ));
        }
    }
    for (name, prompt) in &contracts.prompts {
        if !grants.prompts.iter().any(|g| glob_match(g, name)) {
            warnings.push(format!(
                "prompt `{name}` ({}) is reachable by no caller: no `prompts:` glob of a caller or role in {config_file} matches it",
                prompt.file.display()
            ));
        }
    }
    warnings
}

/// What `serve` needs that `check` did not: unset callers' key variables and the `${VAR}`s of
/// the parts only a running gateway reads.
pub fn environment(config: &Config) -> Vec<String> {
    let mut warnings: Vec<String> = config
        .callers_without_keys()
        .into_iter()
        .map(|(caller, var)| {
            format!(
                "caller `{caller}`: environment variable {var} (`api_key_env`) is not set: `serve` will not start without it"
            )
        })
        .collect();
    warnings.extend(config.unresolved.iter().map(|u| {
        format!(
            "`{}` in {}: {}: `serve` will not start without it",
            u.key,
            config.source.display(),
            u.message
        )
    }));
    warnings
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Proves: a tool, resource and prompt that no caller's or role's glob matches are each
    /// warned about, and those some caller, or an OAuth role, reaches are not.
    #[test]
    fn warns_of_what_no_caller_reaches() {
        let dir = tempfile::tempdir().expect("tempdir");
        let contracts = dir.path().join("contracts");
        std::fs::create_dir(&contracts).expect("mkdir");
        std::fs::write(
            contracts.join("a.yaml"),
            "upstream: a\ntools:\n  read_x: {}\n  write_x: {}\n  admin_x: {}\nresources:\n  - uri: \"test://one\"\n  - uri: \"file:///srv/*\"\n  - uri: \"test://orphan\"\nprompts:\n  greet: {}\n  lonely: {}\n",
        )
        .expect("write");
        let config_path = dir.path().join("narrowgate.yaml");
        std::fs::write(
            &config_path,
            "callers:\n  - name: c\n    api_key_sha256: 2c26b46b68ffc68ff99b453c1d30413413422d706483bfa0f98a5e886266e7ae\n    tools: [\"read_*\"]\n    resources: [\"test://one\", \"file:///srv/docs.txt\"]\n    prompts: [greet]\noauth:\n  issuer: https://idp\n  audience: https://gw\n  jwks_url: https://idp/jwks\n  roles:\n    ops: { tools: [admin_x] }\n",
        )
        .expect("write");
        let config = Config::load(&config_path).expect("config");
        let set = ContractSet::load_dir(&contracts).expect("contracts");
        let warnings = unreachable(&config, &set);
        let named: Vec<&str> = warnings
            .iter()
            .filter_map(|w| w.split('`').nth(1))
            .collect();
        assert_eq!(
            named,
            ["write_x", "test://orphan", "lonely"],
            "{warnings:#?}"
        );
    }
}
