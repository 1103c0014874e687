//! Components the host must refuse at load, each with a message that says why,
//! refused by their export names before any function is typechecked (so each
//! declares only a token function): by default one built against
//! `weir:provider@0.9.0` (a version this host does not speak); with
//! `describe-only` a 0.2.0 component that exports `describe` and no operation;
//! with `mixed-versions` one exporting 0.2.0's `describe` beside 0.1.0's `chat`;
//! with `logprobs-alone` a 0.3.0 one exporting `logprobs` without `chat`;
//! with `wrong-types` one whose export names are right and whose function types
//! are not (refused when its functions are typechecked, still at load);
//! with `other-world` one that is not a provider at all. Only the `wasm32` build
//! has content: natively the WIT export names are not valid linker symbols, and
//! nothing native uses this crate.

#[cfg(all(
    target_arch = "wasm32",
    not(any(
        feature = "other-world",
        feature = "describe-only",
        feature = "mixed-versions",
        feature = "wrong-types",
        feature = "logprobs-alone"
    ))
))]
#[allow(unsafe_code, reason = "wit-bindgen's generated export glue")]
mod exports {
    wit_bindgen::generate!({
        inline: "
            package weir:provider@0.9.0;
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

#[cfg(all(target_arch = "wasm32", feature = "describe-only"))]
#[allow(unsafe_code, reason = "wit-bindgen's generated export glue")]
mod exports {
    wit_bindgen::generate!({
        inline: "
            package weir:provider@0.2.0;
            interface describe { providers: func() -> list<string>; }
            world describe-only { export describe; }
        ",
    });

    struct DescribeOnly;

    impl exports::weir::provider::describe::Guest for DescribeOnly {
        fn providers() -> Vec<String> {
            vec!["does-nothing".to_owned()]
        }
    }

    export!(DescribeOnly);
}

#[cfg(all(target_arch = "wasm32", feature = "logprobs-alone"))]
#[allow(unsafe_code, reason = "wit-bindgen's generated export glue")]
mod exports {
    wit_bindgen::generate!({
        inline: "
            package weir:provider@0.3.0;
            interface describe { providers: func() -> list<string>; }
            interface logprobs { serves: func(provider: string, wire-id: string) -> bool; }
            world logprobs-alone { export describe; export logprobs; }
        ",
    });

    struct LogprobsAlone;

    impl exports::weir::provider::describe::Guest for LogprobsAlone {
        fn providers() -> Vec<String> {
            vec!["logprobs-alone".to_owned()]
        }
    }

    impl exports::weir::provider::logprobs::Guest for LogprobsAlone {
        fn serves(_: String, _: String) -> bool {
            true
        }
    }

    export!(LogprobsAlone);
}

#[cfg(all(target_arch = "wasm32", feature = "mixed-versions"))]
#[allow(unsafe_code, reason = "wit-bindgen's generated export glue")]
mod exports {
    wit_bindgen::generate!({
        inline: "
            package test:mixed;
            world mixed {
              export weir:provider/describe@0.2.0;
              export weir:provider/chat@0.1.0;
            }
            package weir:provider@0.2.0 {
              interface describe { providers: func() -> list<string>; }
            }
            package weir:provider@0.1.0 {
              interface chat { ping: func() -> u32; }
            }
        ",
        world: "test:mixed/mixed",
    });

    struct Mixed;

    impl exports::weir::provider0_2_0::describe::Guest for Mixed {
        fn providers() -> Vec<String> {
            vec!["mixed".to_owned()]
        }
    }

    impl exports::weir::provider0_1_0::chat::Guest for Mixed {
        fn ping() -> u32 {
            1
        }
    }

    export!(Mixed);
}

#[cfg(all(target_arch = "wasm32", feature = "wrong-types"))]
#[allow(unsafe_code, reason = "wit-bindgen's generated export glue")]
mod exports {
    wit_bindgen::generate!({
        inline: "
            package weir:provider@0.2.0;
            interface describe {
              providers: func() -> list<string>;
              serves: func(provider: string, wire-id: string) -> bool;
              claims: func(provider: string, wire-id: string) -> bool;
            }
            interface rerank {
              serves: func(provider: string, wire-id: string) -> bool;
              encode: func(query: string) -> u32;
              decode: func(body: list<u8>) -> u32;
              classify: func(status: u16) -> u32;
            }
            world wrong-types { export describe; export rerank; }
        ",
    });

    struct WrongTypes;

    impl exports::weir::provider::describe::Guest for WrongTypes {
        fn providers() -> Vec<String> {
            vec!["wrong-types".to_owned()]
        }
        fn serves(_: String, _: String) -> bool {
            true
        }
        fn claims(_: String, _: String) -> bool {
            false
        }
    }

    impl exports::weir::provider::rerank::Guest for WrongTypes {
        fn serves(_: String, _: String) -> bool {
            true
        }
        fn encode(_: String) -> u32 {
            0
        }
        fn decode(_: Vec<u8>) -> u32 {
            0
        }
        fn classify(_: u16) -> u32 {
            0
        }
    }

    export!(WrongTypes);
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
