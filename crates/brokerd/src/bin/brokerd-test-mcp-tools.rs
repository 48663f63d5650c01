//! A test helper, not part of the appliance: an MCP server whose tools say what a test wants.
//!
//! `brokerd-test-mcp-tools SPEC` reads SPEC, a JSON file
//! `{"tools": [{"name": N, "description": D, "text": T, "is_error": B}]}`, and serves those tools
//! over stdio (newline-delimited JSON-RPC, as MCP's stdio transport): `tools/list` lists each
//! with its description and an input schema that takes any object, and every `tools/call` of a
//! tool answers its `text`, as an error result when `is_error`. The end-to-end tests use it to
//! play a hostile server: a description that carries instructions, an error that carries data.

use anyhow::{Context, bail};
use serde::Deserialize;
use serde_json::{Value, json};
use std::io::{BufRead, Write};

/// One scripted tool.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ScriptedTool {
    name: String,
    description: String,
    text: String,
    #[serde(default)]
    is_error: bool,
}

/// The whole SPEC file.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Spec {
    tools: Vec<ScriptedTool>,
}

fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [spec] = args.as_slice() else {
        bail!("usage: brokerd-test-mcp-tools SPEC");
    };
    let text = std::fs::read_to_string(spec).with_context(|| format!("cannot read {spec}"))?;
    let spec: Spec =
        serde_json::from_str(&text).with_context(|| format!("{spec} is not a spec"))?;
    let stdin = std::io::stdin();
    let mut stdout = std::io::stdout();
    for line in stdin.lock().lines() {
        let message: Value = serde_json::from_str(&line?)?;
        let Some(id) = message.get("id") else {
            continue; // a notification
        };
        let answer = match answer(&spec, &message) {
            Ok(result) => json!({"jsonrpc": "2.0", "id": id, "result": result}),
            Err(message) => {
                json!({"jsonrpc": "2.0", "id": id, "error": {"code": -32601, "message": message}})
            }
        };
        writeln!(stdout, "{answer}")?;
        stdout.flush()?;
    }
    Ok(())
}

/// The result of one request, or why there is none.
fn answer(spec: &Spec, message: &Value) -> Result<Value, String> {
    match message["method"].as_str().unwrap_or_default() {
        "initialize" => Ok(json!({
            "protocolVersion": message["params"]["protocolVersion"],
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "brokerd-test-mcp-tools", "version": "0"},
        })),
        "ping" => Ok(json!({})),
        "tools/list" => Ok(json!({
            "tools": spec.tools.iter().map(|t| json!({
                "name": t.name,
                "description": t.description,
                "inputSchema": {"type": "object"},
            })).collect::<Vec<_>>()
        })),
        "tools/call" => {
            let name = message["params"]["name"].as_str().unwrap_or_default();
            let tool = spec
                .tools
                .iter()
                .find(|t| t.name == name)
                .ok_or_else(|| format!("no tool {name:?}"))?;
            Ok(json!({
                "content": [{"type": "text", "text": tool.text}],
                "isError": tool.is_error,
            }))
        }
        other => Err(format!("method not found: {other}")),
    }
}
