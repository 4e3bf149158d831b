//! `bench-validation`: what contract enforcement costs per call, measured on the library alone.
//!
//! ```text
//! cargo run --release --example bench-validation -- [CONTRACTS_DIR] [--millis-per-case 400]
//! ```
//!
//! It loads the benchmark contracts (`bench/contracts` by default) the way `narrowgate serve` does,
//! compiles the demo upstream's own schemas for the same tools (copied from
//! `tests/upstream/catalog.rs`), and times, per tool:
//!
//! * `check_arguments`: the arguments against the contract's and the upstream's input schemas;
//! * `check_result`: a result against both output schemas, including its size check and the
//!   rebuilt content (minus the cost of cloning the input, timed separately as `clone_result`);
//! * `reject_arguments`: the path of an argument the contract refuses (with its message built);
//! * `compile_contract`: compiling the contract's input and output schemas (start-up cost).
//!
//! Each figure is the median of 15 batches, in nanoseconds per operation. Prints one JSON object.

use std::hint::black_box;
use std::path::PathBuf;
use std::time::Duration;

use narrowgate::harness::ContractSet;
use narrowgate::harness::schema;
use narrowgate::harness::{OutputSchemas, enforce};
use rmcp::model::CallToolResult;
use serde_json::{Value, json};

#[path = "median.rs"]
mod median;
use median::{BATCHES, time};

struct Case {
    tool: &'static str,
    upstream_input: Value,
    upstream_output: Value,
    arguments: Value,
    bad_arguments: Value,
    structured: Value,
}

fn cases() -> Vec<Case> {
    let draft7 = "http://json-schema.org/draft-07/schema#";
    vec![
        Case {
            tool: "weather",
            upstream_input: json!({
                "$schema": draft7, "type": "object",
                "properties": {"location": {"type": "string", "enum": ["New York", "Chicago", "Los Angeles"], "description": "City name"}},
                "required": ["location"], "additionalProperties": false
            }),
            upstream_output: json!({
                "$schema": draft7, "type": "object",
                "properties": {"temperature": {"type": "number"}, "conditions": {"type": "string"}, "humidity": {"type": "number"}},
                "required": ["temperature", "conditions", "humidity"], "additionalProperties": false
            }),
            arguments: json!({"location": "Chicago"}),
            bad_arguments: json!({"location": "Paris"}),
            structured: json!({"temperature": 18.5, "conditions": "Windy", "humidity": 60}),
        },
        Case {
            tool: "add",
            upstream_input: json!({
                "type": "object",
                "properties": {"a": {"type": "number"}, "b": {"type": "number"}},
                "required": ["a", "b"]
            }),
            upstream_output: json!({
                "type": "object", "properties": {"sum": {"type": "number"}}, "required": ["sum"]
            }),
            arguments: json!({"a": 1250.5, "b": 300, "currency": "EUR", "reference": "INV-2026-000123",
                              "note": "quarterly services", "tags": ["q3", "services"]}),
            bad_arguments: json!({"a": 1250.5, "b": 300, "currency": "EUR", "reference": "INV-26-1"}),
            structured: json!({"sum": 1550.5}),
        },
    ]
}

fn main() {
    let mut dir = PathBuf::from("bench/contracts");
    let mut millis = 400u64;
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--millis-per-case" => {
                millis = args
                    .next()
                    .and_then(|v| v.parse().ok())
                    .expect("--millis-per-case N");
            }
            other => dir = PathBuf::from(other),
        }
    }
    let budget = Duration::from_millis(millis);
    let contracts = match ContractSet::load_dir(&dir) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("bench-validation: {e}");
            std::process::exit(2);
        }
    };
    let mut report = serde_json::Map::new();
    for case in cases() {
        let Some(contract) = contracts.tools.get(case.tool) else {
            eprintln!(
                "bench-validation: no contract for `{}` in {}",
                case.tool,
                dir.display()
            );
            std::process::exit(2);
        };
        let up_in = schema::compile(&case.upstream_input).expect("upstream input schema");
        let up_out = schema::compile(&case.upstream_output).expect("upstream output schema");
        let out_validator = contract.output_validator.as_deref();
        let schemas = OutputSchemas {
            contract: out_validator,
            upstream: Some(&up_out),
            max_bytes: 4 << 20,
            error_text_bytes: 1 << 10,
            content: &contract.content,
        };
        // Sanity: the good case passes, the bad one is refused.
        enforce::check_arguments(&contract.input_validator, Some(&up_in), &case.arguments)
            .expect("valid arguments pass");
        assert!(
            enforce::check_arguments(&contract.input_validator, Some(&up_in), &case.bad_arguments)
                .is_err()
        );
        let result = CallToolResult::structured(case.structured.clone());
        enforce::check_result(result.clone(), &schemas).expect("valid result passes");

        let check_arguments = time(budget, || {
            black_box(
                enforce::check_arguments(
                    &contract.input_validator,
                    Some(&up_in),
                    black_box(&case.arguments),
                )
                .is_ok(),
            );
        });
        let reject_arguments = time(budget, || {
            black_box(
                enforce::check_arguments(
                    &contract.input_validator,
                    Some(&up_in),
                    black_box(&case.bad_arguments),
                )
                .is_err(),
            );
        });
        let clone_result = time(budget, || {
            black_box(black_box(&result).clone());
        });
        let check_result_with_clone = time(budget, || {
            let r = black_box(&result).clone();
            black_box(enforce::check_result(r, &schemas).is_ok());
        });
        let contract_input = contract.input.clone();
        let contract_output = contract.output.clone().unwrap_or(Value::Null);
        let compile_contract = time(budget, || {
            black_box(schema::compile(black_box(&contract_input)).is_ok());
            black_box(schema::compile(black_box(&contract_output)).is_ok());
        });
        let check_result = (check_result_with_clone - clone_result).max(0.0);
        report.insert(
            case.tool.to_string(),
            json!({
                "check_arguments_ns": check_arguments.round(),
                "check_result_ns": check_result.round(),
                "per_call_total_ns": (check_arguments + check_result).round(),
                "clone_result_ns": clone_result.round(),
                "reject_arguments_ns": reject_arguments.round(),
                "compile_contract_ns": compile_contract.round(),
            }),
        );
    }
    println!(
        "{}",
        json!({"kind": "validation", "contracts": dir.display().to_string(), "batches": BATCHES, "tools": report})
    );
}
