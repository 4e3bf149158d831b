//! `narrowgate init`'s `resources:` and `prompts:` sections: every resource, template and prompt
//! the upstream offers, with its texts copied for review (as tools are), so that accepting `init`
//! unchanged exposes what the upstream offers, and an operator narrows from there.

use std::fmt::Write;

use crate::contract::valid_tool_name;
use crate::upstream::Offer;

/// The pattern a scaffolded template variable gets: one path segment of bounded length. Meant to
/// be narrowed.
const ANY_SEGMENT: &str = "^[^/]{1,256}$";

/// The YAML of `resources:` and `prompts:` for `offer` (empty when it offers neither), each
/// prompt exposed as `prefix` and its name (`upstream_prompt` kept).
/// Resources keep their URIs and a URI belongs to one upstream: with a prefix (a second copy
/// of a server) they are written commented out, so that the file loads next to the first copy's.
pub fn render_prefixed(offer: &Offer, quote: impl Fn(&str) -> String, prefix: &str) -> String {
    let mut text = String::new();
    if !prefix.is_empty() && (!offer.resources.is_empty() || !offer.templates.is_empty()) {
        text.push_str(
            "# Resources of this copy, left out: a URI belongs to one upstream, and the first\n\
             # copy's contract may declare them. Uncomment them here only if it does not.\n",
        );
    }
    let resources_start = text.len();
    if !offer.resources.is_empty() || !offer.templates.is_empty() {
        text.push_str(
            "# Resources: narrow `uri` globs and template `variables`, keep `mime_types`.\n",
        );
        text.push_str("resources:\n");
    }
    for r in &offer.resources {
        let _ = writeln!(text, "  - uri: {}", quote(&r.uri));
        if let Some(d) = &r.description {
            let _ = writeln!(text, "    description: {}", quote(d));
        }
        if let Some(m) = &r.mime_type {
            let _ = writeln!(text, "    mime_types: [{}]", quote(m));
        }
    }
    for t in &offer.templates {
        let _ = writeln!(text, "  - uri_template: {}", quote(&t.uri_template));
        let names = variables(&t.uri_template);
        if names.is_empty() {
            text.push_str("    variables: {}\n");
        } else {
            text.push_str("    variables:\n");
            for name in names {
                let _ = writeln!(text, "      {name}: {{ pattern: {} }}", quote(ANY_SEGMENT));
            }
        }
        if let Some(d) = &t.description {
            let _ = writeln!(text, "    description: {}", quote(d));
        }
        if let Some(m) = &t.mime_type {
            let _ = writeln!(text, "    mime_types: [{}]", quote(m));
        }
    }
    if !prefix.is_empty() {
        let commented: String = text[resources_start..]
            .lines()
            .map(|line| format!("# {line}\n"))
            .collect();
        text.truncate(resources_start);
        text.push_str(&commented);
    }
    let prompts: Vec<_> = offer
        .prompts
        .iter()
        .filter(|p| valid_tool_name(&format!("{prefix}{}", p.name)))
        .collect();
    if !prompts.is_empty() {
        text.push_str("# Prompts: narrow each argument with `enum` or `pattern`.\nprompts:\n");
    }
    for p in prompts {
        if prefix.is_empty() {
            let _ = writeln!(text, "  {}:", quote(&p.name));
        } else {
            let _ = writeln!(text, "  {}:", quote(&format!("{prefix}{}", p.name)));
            let _ = writeln!(text, "    upstream_prompt: {}", quote(&p.name));
        }
        if let Some(d) = &p.description {
            let _ = writeln!(text, "    description: {}", quote(d));
        }
        let arguments = p.arguments.as_deref().unwrap_or_default();
        if arguments.is_empty() {
            continue;
        }
        text.push_str("    arguments:\n");
        for a in arguments {
            let mut fields = format!("required: {}", a.required.unwrap_or(false));
            if let Some(d) = &a.description {
                let _ = write!(fields, ", description: {}", quote(d));
            }
            let _ = writeln!(text, "      {}: {{ {fields} }}", quote(&a.name));
        }
    }
    text
}

/// The `{name}` variables of a simple URI template (others are left for the operator: the
/// contract loader refuses them with a message).
fn variables(template: &str) -> Vec<&str> {
    template
        .split('{')
        .skip(1)
        .filter_map(|rest| rest.split_once('}').map(|(name, _)| name))
        .filter(|name| !name.is_empty())
        .collect()
}
