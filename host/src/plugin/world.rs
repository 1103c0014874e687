//! Which `weir:provider` world version a component targets, read from its
//! export names before anything is instantiated.

use wasmtime::Engine;
use wasmtime::component::Component;

/// The world version this host speaks.
pub const WORLD_VERSION: &str = "0.1.0";
const PACKAGE: &str = "weir:provider/";
const REQUIRED_EXPORTS: [&str; 2] = ["describe", "chat"];

/// Checks that the component exports this host's `describe` and `chat`
/// interfaces, and says precisely what is wrong when it does not.
pub fn check_exports(engine: &Engine, component: &Component) -> Result<(), String> {
    let exports: Vec<String> = component.component_type().exports(engine).map(|(name, _)| name.to_owned()).collect();
    let versions: Vec<&str> = exports
        .iter()
        .filter_map(|name| name.strip_prefix(PACKAGE))
        .filter_map(|rest| rest.split_once('@').map(|(_, version)| version))
        .collect();
    if versions.is_empty() {
        return Err(format!(
            "not a weir provider: it exports no `weir:provider` interface (exports: {})",
            if exports.is_empty() { "none".to_owned() } else { exports.join(", ") }
        ));
    }
    if let Some(other) = versions.iter().find(|v| **v != WORLD_VERSION) {
        return Err(format!("it targets weir:provider@{other}; this host speaks weir:provider@{WORLD_VERSION}"));
    }
    for required in REQUIRED_EXPORTS {
        let name = format!("{PACKAGE}{required}@{WORLD_VERSION}");
        if !exports.contains(&name) {
            return Err(format!("it does not export `{name}`"));
        }
    }
    Ok(())
}
