//! The host's layers, read from its sources and enforced: which top-level
//! module uses which (`crate::NAME`, `crate::{NAME, …}` groups, and names the
//! crate root re-exports, outside comments and `#[cfg(test)]` modules), checked
//! against [`LAYERS`], the picture `host/src/lib.rs` draws. A module may use
//! its own layer and those below; an edge up fails, naming it. A module-level
//! cycle of more than two modules fails, and so does a two-module cycle that is
//! not in [`ALLOWED_PAIRS`]. A new module must be placed in a layer first.
//!
//! Issue 45 measured 19 of 29 modules in one cycle before the work began
//! (stop 57); the steps of stops 58–59 left none but the pair below.

// Test code: a failed step should stop the test with its message.
#![allow(clippy::expect_used)]

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The layers, lowest first, and their modules (the picture in `lib.rs`).
const LAYERS: [(&str, &[&str]); 6] = [
    (
        "vocabulary",
        &[
            "wit",
            "types",
            "failure",
            "caller",
            "memo",
            "redact",
            "log_writer",
            "estimate",
            "accounting",
            "record",
            "chat",
            "reach",
            "config",
        ],
    ),
    ("boundaries", &["plugin", "transport"]),
    ("catalog", &["catalog", "compliance", "seal"]),
    (
        "state",
        &[
            "admission",
            "answer_cache",
            "identity",
            "fleet",
            "budget",
            "ledger",
            "stored",
            "metrics",
            "telemetry",
            "routing",
            "admin",
        ],
    ),
    ("operations", &["error", "stream", "retrieval", "decision", "call", "runtime", "status"]),
    ("surfaces", &["server", "check"]),
];

/// Two-module cycles kept on purpose: the runtime's handle ([`Weir`] in
/// `runtime`) runs the call template (`call`), whose stages read the handle's
/// parts.
const ALLOWED_PAIRS: [[&str; 2]; 1] = [["call", "runtime"]];

type Graph = BTreeMap<String, BTreeSet<String>>;

#[test]
fn every_module_uses_only_its_layer_and_those_below() {
    let graph = graph(&Path::new(env!("CARGO_MANIFEST_DIR")).join("src"));
    let layer_of: BTreeMap<&str, usize> = LAYERS
        .iter()
        .enumerate()
        .flat_map(|(index, (_, modules))| modules.iter().map(move |module| (*module, index)))
        .collect();
    let unplaced: Vec<&String> = graph.keys().filter(|module| !layer_of.contains_key(module.as_str())).collect();
    assert!(unplaced.is_empty(), "modules in no layer (place them in LAYERS and lib.rs's picture): {unplaced:?}");
    let gone: Vec<&&str> = layer_of.keys().filter(|module| !graph.contains_key(**module)).collect();
    assert!(gone.is_empty(), "LAYERS names modules that do not exist: {gone:?}");
    let upward: Vec<String> = graph
        .iter()
        .flat_map(|(module, uses)| uses.iter().map(move |used| (module, used)))
        .filter(|(module, used)| layer_of[used.as_str()] > layer_of[module.as_str()])
        .map(|(module, used)| {
            let name = |module: &str| LAYERS[layer_of[module]].0;
            format!("{module} ({}) -> {used} ({})", name(module), name(used))
        })
        .collect();
    assert!(upward.is_empty(), "edges up the layers:\n{}", upward.join("\n"));
}

#[test]
fn no_cycle_but_the_allowed_pairs() {
    let graph = graph(&Path::new(env!("CARGO_MANIFEST_DIR")).join("src"));
    let cycles: Vec<BTreeSet<String>> = components(&graph).into_iter().filter(|c| c.len() > 1).collect();
    let described = describe(&graph, &cycles);
    for cycle in &cycles {
        assert!(cycle.len() <= 2, "a cycle of {} modules:\n{described}", cycle.len());
        let pair: Vec<&str> = cycle.iter().map(String::as_str).collect();
        assert!(ALLOWED_PAIRS.iter().any(|allowed| allowed[..] == pair[..]), "a cycle not allowed:\n{described}");
    }
}

/// The reader itself, on a small tree: a comment, a test module and a
/// non-module name are not edges; a `crate::{…}` group and a name the root
/// re-exports are; a cycle is found.
#[test]
fn the_reader_counts_code_edges_only() {
    let dir = tempfile::tempdir().expect("temp dir");
    let write = |name: &str, text: &str| std::fs::write(dir.path().join(name), text).expect("write");
    write("lib.rs", "mod a; mod b; mod c; mod d;\npub use d::{Handle, other as Renamed};\n");
    write("a.rs", "use crate::b::X; // crate::c in a comment\n");
    write(
        "b.rs",
        "use crate::a::Y;\n#[cfg(test)]\nmod tests { use crate::c::Z; fn f() { if true { } } }\n#[cfg(test)]\nmod b_tests;\n",
    );
    std::fs::create_dir(dir.path().join("b")).expect("dir");
    write("b/b_tests.rs", "use crate::c::Z;\n");
    write("c.rs", "use crate::types::T; /* nothing */\nuse crate::{\n    a::{self, P},\n    Handle,\n};\n");
    write("d.rs", "fn f() -> crate::Renamed { todo!() }\n#[cfg(test)]\n#[path = \"d/extra_tests.rs\"]\nmod tests;\n");
    std::fs::create_dir(dir.path().join("d")).expect("dir");
    write("d/extra_tests.rs", "use crate::a::Q;\n");
    let graph = graph(dir.path());
    assert_eq!(graph["a"], BTreeSet::from(["b".to_owned()]));
    assert_eq!(graph["b"], BTreeSet::from(["a".to_owned()]));
    assert_eq!(graph["c"], BTreeSet::from(["a".to_owned(), "d".to_owned()]), "`types` is not a module of this tree");
    assert!(graph["d"].is_empty(), "a module's own re-exported name is not an edge, nor its `#[path]` test file's use");
    let cycles: Vec<_> = components(&graph).into_iter().filter(|c| c.len() > 1).collect();
    assert_eq!(cycles, [BTreeSet::from(["a".to_owned(), "b".to_owned()])]);
}

/// Top-level modules (a file or a folder under `src`, but `lib.rs` and `bin`)
/// and the modules each uses.
fn graph(src: &Path) -> Graph {
    let modules: BTreeSet<String> = std::fs::read_dir(src)
        .expect("src is readable")
        .map(|entry| entry.expect("entry").path())
        .filter_map(|path| module_name(&path))
        .collect();
    let reexported = root_reexports(src);
    modules
        .iter()
        .map(|module| {
            let mut uses = BTreeSet::new();
            let all: Vec<PathBuf> =
                files(&src.join(module)).into_iter().chain(Some(src.join(format!("{module}.rs")))).collect();
            let test_files = test_files(&all);
            for file in all.iter().filter(|file| !test_files.contains(*file)) {
                let Ok(text) = std::fs::read_to_string(file) else { continue };
                for used in crate_uses(&without_tests(&without_comments(&text))) {
                    let used = reexported.get(&used).cloned().unwrap_or(used);
                    if used != *module && modules.contains(&used) {
                        uses.insert(used);
                    }
                }
            }
            (module.clone(), uses)
        })
        .collect()
}

/// The files of `#[cfg(test)] mod NAME;` declarations among `files` (a
/// test module in a file of its own: `NAME.rs` beside its declaring file,
/// or the file a `#[path = "FILE"]` after the `cfg` names, which Rust reads
/// from the declaring file's folder).
fn test_files(files: &[PathBuf]) -> BTreeSet<PathBuf> {
    let mut found = BTreeSet::new();
    for file in files {
        let Ok(text) = std::fs::read_to_string(file) else { continue };
        let dir = match file.file_name().and_then(|name| name.to_str()) {
            Some("mod.rs") => file.parent().map(Path::to_path_buf),
            _ => file.parent().map(|parent| parent.join(file.file_stem().unwrap_or_default())),
        };
        let Some(dir) = dir else { continue };
        for (at, _) in text.match_indices("#[cfg(test)]") {
            let declaration = text[at + "#[cfg(test)]".len()..].trim_start();
            let (path, declaration) =
                match declaration.strip_prefix("#[path = \"").and_then(|rest| rest.split_once("\"]")) {
                    Some((path, rest)) => (Some(path), rest.trim_start()),
                    None => (None, declaration),
                };
            let declaration = declaration.strip_prefix("pub(crate) ").unwrap_or(declaration);
            let Some(name) = declaration.strip_prefix("mod ").and_then(|rest| rest.split_once(';')) else { continue };
            if !name.0.chars().all(|c| c.is_alphanumeric() || c == '_') {
                continue;
            }
            match (path, file.parent()) {
                (Some(path), Some(folder)) => found.insert(folder.join(path)),
                _ => found.insert(dir.join(format!("{}.rs", name.0))),
            };
        }
    }
    found
}

fn module_name(path: &Path) -> Option<String> {
    let name = path.file_name()?.to_str()?;
    match name.strip_suffix(".rs") {
        Some("lib") => None,
        Some(stem) => Some(stem.to_owned()),
        None if path.is_dir() && name != "bin" => Some(name.to_owned()),
        None => None,
    }
}

/// Every `.rs` file under `dir` (none when it is not a folder).
fn files(dir: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else { return Vec::new() };
    let mut found = Vec::new();
    for path in entries.map(|entry| entry.expect("entry").path()) {
        if path.is_dir() {
            found.extend(files(&path));
        } else if path.extension().is_some_and(|ext| ext == "rs") {
            found.push(path);
        }
    }
    found
}

/// The text without `//` comments (doc comments included) and `/* */` ones.
fn without_comments(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(start) = rest.find('/') {
        out.push_str(&rest[..start]);
        let tail = &rest[start..];
        if tail.starts_with("//") {
            rest = tail.find('\n').map_or("", |end| &tail[end..]);
        } else if tail.starts_with("/*") {
            rest = tail.find("*/").map_or("", |end| &tail[end + 2..]);
        } else {
            out.push('/');
            rest = &tail[1..];
        }
    }
    out.push_str(rest);
    out
}

/// The text without `#[cfg(test)] mod NAME { … }` blocks.
fn without_tests(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find("#[cfg(test)]") {
        out.push_str(&rest[..at]);
        let tail = &rest[at..];
        // A test module with a body (`mod tests;` declares a file, skipped by name).
        let test_module = |open: &usize| tail[..*open].contains("mod ") && !tail[..*open].contains(';');
        let Some(open) = tail.find('{').filter(test_module) else {
            out.push_str("#[cfg(test)]");
            rest = &tail["#[cfg(test)]".len()..];
            continue;
        };
        let mut depth = 0usize;
        let mut end = tail.len();
        for (index, byte) in tail.bytes().enumerate().skip(open) {
            match byte {
                b'{' => depth += 1,
                b'}' => {
                    depth -= 1;
                    if depth == 0 {
                        end = index + 1;
                        break;
                    }
                }
                _ => {}
            }
        }
        rest = &tail[end..];
    }
    out.push_str(rest);
    out
}

/// The first segment of every `crate::SEGMENT` path, and of every item of a
/// `crate::{…}` group.
fn crate_uses(text: &str) -> BTreeSet<String> {
    let mut found = BTreeSet::new();
    for (at, matched) in text.match_indices("crate::") {
        if text[..at].ends_with(|c: char| c.is_alphanumeric() || c == '_') {
            continue;
        }
        let rest = &text[at + matched.len()..];
        match rest.strip_prefix('{') {
            Some(group) => found.extend(group_items(group).into_iter().map(|item| first_segment(&item))),
            None => {
                found.insert(first_segment(rest));
            }
        }
    }
    found.retain(|name| !name.is_empty());
    found
}

/// The top-level items of a `{…}` group (`group` starts after the brace).
fn group_items(group: &str) -> Vec<String> {
    let mut items = vec![String::new()];
    let mut depth = 0usize;
    for c in group.chars() {
        match c {
            '{' => depth += 1,
            '}' if depth == 0 => break,
            '}' => depth -= 1,
            ',' if depth == 0 => items.push(String::new()),
            _ => {}
        }
        if let Some(item) = items.last_mut().filter(|_| c != ',' || depth > 0) {
            item.push(c);
        }
    }
    items
}

fn first_segment(path: &str) -> String {
    path.trim_start().chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect()
}

/// The names the crate root re-exports (`pub use MODULE::{A, b as C};`), by
/// the module they come from: `crate::A` is an edge to `MODULE`.
fn root_reexports(src: &Path) -> BTreeMap<String, String> {
    let text = without_comments(&std::fs::read_to_string(src.join("lib.rs")).unwrap_or_default());
    let mut names = BTreeMap::new();
    for statement in text.split(';') {
        let Some(path) = statement.trim().strip_prefix("pub use ") else { continue };
        let Some((module, items)) = path.split_once("::") else { continue };
        let items = items.trim().trim_start_matches('{').trim_end_matches('}');
        for item in items.split(',') {
            let name = item.rsplit(" as ").next().unwrap_or_default().trim();
            if !name.is_empty() {
                names.insert(name.to_owned(), module.trim().to_owned());
            }
        }
    }
    names
}

/// Strongly connected components (Tarjan), each a set of modules.
fn components(graph: &Graph) -> Vec<BTreeSet<String>> {
    struct State<'g> {
        graph: &'g Graph,
        index: BTreeMap<&'g str, usize>,
        low: BTreeMap<&'g str, usize>,
        stack: Vec<&'g str>,
        found: Vec<BTreeSet<String>>,
    }
    fn visit<'g>(state: &mut State<'g>, node: &'g str) {
        let next = state.index.len();
        state.index.insert(node, next);
        state.low.insert(node, next);
        state.stack.push(node);
        for used in &state.graph[node] {
            let used = used.as_str();
            if !state.index.contains_key(used) {
                visit(state, used);
                let low = state.low[used].min(state.low[node]);
                state.low.insert(node, low);
            } else if state.stack.contains(&used) {
                let low = state.index[used].min(state.low[node]);
                state.low.insert(node, low);
            }
        }
        if state.low[node] == state.index[node] {
            let mut component = BTreeSet::new();
            while let Some(top) = state.stack.pop() {
                component.insert(top.to_owned());
                if top == node {
                    break;
                }
            }
            state.found.push(component);
        }
    }
    let mut state = State { graph, index: BTreeMap::new(), low: BTreeMap::new(), stack: Vec::new(), found: Vec::new() };
    for node in graph.keys() {
        if !state.index.contains_key(node.as_str()) {
            visit(&mut state, node);
        }
    }
    state.found
}

/// The cycles and, for each module in one, the modules of its cycle it uses.
fn describe(graph: &Graph, cycles: &[BTreeSet<String>]) -> String {
    let mut text = String::new();
    for cycle in cycles {
        text.push_str(&format!("cycle of {}:\n", cycle.len()));
        for module in cycle {
            let inside: Vec<&str> =
                graph[module].iter().filter(|used| cycle.contains(*used)).map(String::as_str).collect();
            text.push_str(&format!("  {module} -> {}\n", inside.join(" ")));
        }
    }
    text
}
