//! The tools of an epoch in broker mode: loopd's own tools and what brokerd's catalogue offers
//! the session, as one [`Registry`]. Above `tools` and `outputs` (it takes `read_output`'s
//! schema), below `subagent` and `engine`, which build a registry per session.

use crate::outputs::read_output_schema;
use crate::tools::{CLOCK, Entry, Registry, clock_schema};
use proto::{Catalogue, LOOPD_TOOLS, READ_OUTPUT};

/// The registry of an epoch in broker mode: loopd's own `clock` (core), then every tool the
/// catalogue offers, core when named in `core_tools`, with the catalogue's label of its
/// description, then loopd's own `read_output` (core when named in `core_tools`). Names loopd
/// answers itself are never taken from the catalogue.
pub fn registry(catalogue: &Catalogue, core_tools: &[String]) -> Registry {
    let mut entries = vec![Entry {
        schema: clock_schema(),
        core: true,
    }];
    let offered: Vec<&proto::CatalogueTool> = catalogue
        .tools
        .iter()
        .filter(|t| {
            let name = t.schema.name.as_str();
            name != CLOCK && !LOOPD_TOOLS.contains(&name)
        })
        .collect();
    entries.extend(offered.iter().map(|t| Entry {
        schema: t.schema.clone(),
        core: core_tools.contains(&t.schema.name),
    }));
    // loopd answers it from the session's stored outputs; core only when named in `core_tools`.
    entries.push(Entry {
        schema: read_output_schema(),
        core: core_tools.iter().any(|name| name == READ_OUTPUT),
    });
    offered.iter().fold(Registry::new(entries), |registry, t| {
        registry.with_description_labels(&t.schema.name, t.labels)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use bxcore::SessionId;
    use proto::ToolSchema;

    fn schema(name: &str) -> ToolSchema {
        ToolSchema {
            name: name.into(),
            description: format!("{name} tool"),
            parameters: serde_json::json!({"type": "object"}),
        }
    }

    #[test]
    fn the_registry_keeps_loopds_own_tools_and_marks_the_core_set() {
        let tool = |name: &str| proto::CatalogueTool {
            schema: schema(name),
            labels: bxcore::Labels::PUBLIC,
        };
        let catalogue = Catalogue {
            session: SessionId::new("s").unwrap(),
            tools: vec![tool("clock"), tool("read_file"), tool("http_fetch")],
        };
        let registry = registry(&catalogue, &["read_file".to_string()]);
        let core: Vec<String> = registry
            .core_schemas()
            .into_iter()
            .map(|s| s.name)
            .collect();
        assert_eq!(core, ["clock", "read_file", "find_tool", "call_tool"]);
        assert_eq!(
            registry.get("clock").unwrap().schema,
            crate::tools::clock_schema()
        );
        assert!(!registry.get("http_fetch").unwrap().core);
    }
}
