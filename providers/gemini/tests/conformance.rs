//! The conformance kit, natively: the generic checks of chat and embeddings and
//! this provider's fixtures (`conformance/*.json`), the same cases `weir check`
//! runs on the built component.

use std::path::Path;

use weir_provider_gemini::Gemini;

#[test]
fn the_gemini_provider_passes_the_conformance_kit() {
    let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("conformance");
    let report = weir_conformance::native::run_chat_embeddings::<Gemini>(Some(&fixtures)).unwrap();
    assert!(report.passed(), "{report}");
}
