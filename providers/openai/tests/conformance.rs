//! The conformance kit, natively: the generic checks of chat, embeddings and
//! rerank and this provider's fixtures (`conformance/*.json`), the same cases
//! `weir check` runs on the built component.

use std::path::Path;

use weir_provider_openai::OpenAi;

#[test]
fn the_openai_provider_passes_the_conformance_kit() {
    let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("conformance");
    let report = weir_conformance::native::run_all::<OpenAi>(Some(&fixtures)).unwrap();
    assert!(report.passed(), "{report}");
}
