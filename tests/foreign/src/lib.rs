//! Components the host must refuse at load, each with a message that says why:
//! by default one built against `weir:provider@0.2.0` (a version this host does
//! not speak); with the `other-world` feature one that is not a provider at all.
//! Only the `wasm32` build has content: natively the WIT export names are not
//! valid linker symbols, and nothing native uses this crate.

#[cfg(all(target_arch = "wasm32", not(feature = "other-world")))]
#[allow(unsafe_code, reason = "wit-bindgen's generated export glue")]
mod exports {
    wit_bindgen::generate!({
        inline: "
            package weir:provider@0.2.0;
            interface describe { providers: func() -> list<string>; }
            world chat-provider { export describe; }
        ",
    });

    struct Future;

    impl exports::weir::provider::describe::Guest for Future {
        fn providers() -> Vec<String> {
            vec!["from-the-future".to_owned()]
        }
    }

    export!(Future);
}

#[cfg(all(target_arch = "wasm32", feature = "other-world"))]
#[allow(unsafe_code, reason = "wit-bindgen's generated export glue")]
mod exports {
    wit_bindgen::generate!({
        inline: "
            package other:thing;
            world calculator { export add: func(a: u32, b: u32) -> u32; }
        ",
    });

    struct Calculator;

    impl Guest for Calculator {
        fn add(a: u32, b: u32) -> u32 {
            a.wrapping_add(b)
        }
    }

    export!(Calculator);
}
