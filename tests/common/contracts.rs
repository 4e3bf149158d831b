//! Contract YAML that several test files declare the same way: one entry under `tools:` each,
//! for the demo upstream's deliberately awkward tools.

/// A contract file for `upstream` whose `tools:` are the `entries` (each one or more entries of
/// YAML such as [`echo_tool`] writes), in that order.
pub fn contract_file(upstream: &str, entries: &[&str]) -> String {
    format!("upstream: {upstream}\ntools:\n{}", entries.concat())
}

/// Contract YAML, one entry under `tools:`: the demo upstream's `bad_weather`, whose results
/// break the output schema (a temperature of 999).
pub const BAD_WEATHER_TOOL: &str = r#"  bad_weather:
    privilege: read
    input:
      type: object
      properties: { location: { type: string, enum: [Chicago] } }
      required: [location]
    output:
      type: object
      properties:
        temperature: { type: number, minimum: -60, maximum: 60 }
        conditions: { type: string }
      required: [temperature, conditions]
"#;

/// Contract YAML, one entry under `tools:`: `name` for the demo upstream's `echo` tool (a read),
/// taking only a `message` of at most `max_length` characters, with the `extra` lines (such as
/// `    rate: 1/m\n`).
pub fn echo_tool(name: &str, max_length: u32, extra: &str) -> String {
    let upstream_tool = if name == "echo" {
        String::new()
    } else {
        "    upstream_tool: echo\n".to_string()
    };
    format!(
        "  {name}:\n{upstream_tool}    privilege: read\n{extra}    input:\n      type: object\n      \
         properties: {{ message: {{ type: string, maxLength: {max_length} }} }}\n      \
         required: [message]\n      additionalProperties: false\n"
    )
}

/// Contract YAML, one entry under `tools:`: `name` for the demo upstream's `counter` tool (a
/// write that counts at once, then answers after its optional `delay_ms`), with the `extra`
/// lines (such as `    dedupe: 60s\n`).
pub fn counter_tool(name: &str, extra: &str) -> String {
    format!(
        "  {name}:\n    upstream_tool: counter\n    privilege: write\n{extra}    input: {{ type: \
         object, properties: {{ delay_ms: {{ type: integer }} }}, additionalProperties: false }}\n"
    )
}

/// Contract YAML, one entry under `tools:`: `name` for the demo upstream's `slow` tool (sleeps
/// `ms` milliseconds) with `privilege`, a 300 ms timeout and the `extra` lines.
pub fn slow_tool(name: &str, privilege: &str, extra: &str) -> String {
    let upstream_tool = if name == "slow" {
        String::new()
    } else {
        "    upstream_tool: slow\n".to_string()
    };
    format!(
        "  {name}:\n{upstream_tool}    privilege: {privilege}\n    timeout: 300ms\n{extra}    \
         input: {{ type: object, properties: {{ ms: {{ type: integer }} }}, required: [ms] }}\n"
    )
}
