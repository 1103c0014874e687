//! The conformance kit, natively: the generic checks and this provider's fixtures
//! (`conformance/*.json`), the same cases `weir check` runs on the built component.

use std::path::Path;

use weir_provider_anthropic_vertex::AnthropicVertex;

#[test]
fn the_anthropic_vertex_provider_passes_the_conformance_kit() {
    let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("conformance");
    let report = weir_conformance::native::run_dialect::<AnthropicVertex>(Some(&fixtures)).unwrap();
    assert!(report.passed(), "{report}");
    // The `native` interface's checks ran on every key: a field and a beta each.
    let native: Vec<&str> =
        report.checks.iter().map(|check| check.name.as_str()).filter(|name| name.starts_with("native: ")).collect();
    assert!(native.iter().any(|name| name.starts_with("native: field `")), "{native:?}");
    assert!(native.iter().any(|name| name.starts_with("native: beta `")), "{native:?}");
}
