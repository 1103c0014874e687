//! The configuration's JSON Schema, generated from the config types: every
//! example configuration validates against it, a stray key does not, and the
//! book's configuration reference and the schema file beside it are what the
//! code generates now (`WEIR_BLESS=1` rewrites them).

// Test code: a failed step should stop the test with its message.
#![allow(clippy::expect_used)]

use std::path::{Path, PathBuf};

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("the host crate is in the repository").to_path_buf()
}

/// A TOML file as the JSON document the schema describes.
fn as_json(text: &str) -> serde_json::Value {
    let value: toml::Value = toml::from_str(text).expect("TOML");
    serde_json::to_value(value).expect("TOML as JSON")
}

fn validator() -> jsonschema::Validator {
    jsonschema::draft202012::new(&weir_host::catalog::config_schema()).expect("the schema is a valid 2020-12 schema")
}

fn errors(validator: &jsonschema::Validator, instance: &serde_json::Value) -> Vec<String> {
    validator.iter_errors(instance).map(|error| format!("{} at {}", error, error.instance_path())).collect()
}

#[test]
fn every_example_config_validates_against_the_schema() {
    let validator = validator();
    let mut files = vec![repo_root().join("host/catalog/default.toml"), repo_root().join("deploy/weir.toml")];
    for entry in std::fs::read_dir(repo_root().join("host/examples")).expect("read host/examples") {
        let path = entry.expect("dir entry").path();
        if path.extension().is_some_and(|ext| ext == "toml") {
            files.push(path);
        }
    }
    assert!(files.len() >= 4, "{files:?}");
    for path in files {
        let text = std::fs::read_to_string(&path).expect("read example");
        let found = errors(&validator, &as_json(&text));
        assert!(found.is_empty(), "{}: {found:#?}", path.display());
    }
}

/// The schema is as strict as the parser: an unknown key, a word no enum
/// holds and a wrong type are each refused.
#[test]
fn the_schema_refuses_what_the_parser_refuses() {
    let validator = validator();
    let entry = "[[model]]\nid = \"m\"\nprovider = \"openai\"\nmax_output_tokens = 1\ncontext_window = 2\n";
    for (broken, why) in [
        (format!("colour = \"red\"\n{entry}"), "an unknown top-level key"),
        (format!("{entry}tokenizer = \"words\"\n"), "a tokenizer no enum holds"),
        (format!("{entry}[server]\nmax_connections = \"many\"\n"), "a string for an integer"),
        (format!("{entry}[role.chat]\nmodel = \"m\"\nlane = \"slow\"\n"), "a lane word no enum holds"),
        (format!("{entry}[fleet]\ncluster_urls = \"redis://127.0.0.1:7000\"\n"), "one string for the cluster's list"),
    ] {
        assert!(weir_host::Config::from_toml(&broken, "test").is_err(), "the parser refuses {why}");
        assert!(!validator.is_valid(&as_json(&broken)), "the schema refuses {why}");
    }
}

/// `[fleet]` names one Redis server or a cluster's nodes: both parse and
/// validate against the schema.
#[test]
fn a_fleet_on_one_server_or_on_a_cluster_validates() {
    let validator = validator();
    let entry = "[[model]]\nid = \"m\"\nprovider = \"openai\"\nmax_output_tokens = 1\ncontext_window = 2\n";
    for fleet in [
        "redis_url = \"redis://127.0.0.1:6379\"",
        "cluster_urls = [\"redis://:pw@10.0.0.1:6379\", \"redis://:pw@10.0.0.2:6379\"]\nkey_prefix = \"weir-eu\"",
    ] {
        let text = format!("{entry}[fleet]\n{fleet}\n");
        let config = weir_host::Config::from_toml(&text, "test").expect("the parser reads it");
        assert!(config.fleet.is_some());
        let found = errors(&validator, &as_json(&text));
        assert!(found.is_empty(), "{fleet}: {found:#?}");
    }
}

/// The committed reference page and schema file are what the code generates.
#[test]
fn the_books_configuration_reference_is_generated() {
    let folder = repo_root().join("docs/src/configuration");
    let generated = [
        ("reference.md", weir_host::catalog::config_reference()),
        ("weir.schema.json", format!("{:#}\n", weir_host::catalog::config_schema())),
    ];
    for (name, text) in generated {
        let path = folder.join(name);
        if std::env::var_os("WEIR_BLESS").is_some() {
            std::fs::create_dir_all(&folder).expect("create the folder");
            std::fs::write(&path, &text).expect("write the generated file");
        }
        let committed = std::fs::read_to_string(&path).unwrap_or_default();
        assert!(
            committed == text,
            "{} differs from what the code generates: run `WEIR_BLESS=1 cargo test -p weir-host --test config_schema` \
             and commit it",
            path.display()
        );
    }
}
