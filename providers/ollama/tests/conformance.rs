//! The conformance kit, natively: generic checks and this dialect's fixtures.

use std::path::Path;

use weir_provider_ollama::Ollama;

#[test]
fn the_template_passes_the_conformance_kit() {
    let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("conformance");
    let report = weir_conformance::native::run::<Ollama>(Some(&fixtures)).unwrap();
    assert!(report.passed(), "{report}");
}
