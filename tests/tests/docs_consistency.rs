//! Checks that keep the architecture docs true to the code: the layer table of
//! `docs/architecture.md` lists exactly each crate's dependencies among ours, every module
//! is named in the layout comment (`//!`) of the file that declares it, and no crate's
//! modules import each other in a circle (but the two pairs the docs name).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The workspace's root folder.
fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("tests/ sits in the workspace")
        .to_path_buf()
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The workspace's member folders, from its `Cargo.toml`.
fn members() -> Vec<String> {
    let manifest = read(&root().join("Cargo.toml"));
    let line = (manifest.lines())
        .find(|l| l.trim_start().starts_with("members"))
        .expect("the workspace lists its members on one line");
    let list = &line[line.find('[').expect("a list") + 1..line.rfind(']').expect("a list")];
    list.split(',')
        .map(|m| m.trim().trim_matches('"').to_string())
        .filter(|m| !m.is_empty())
        .collect()
}

/// The names in backquotes of a table cell that start with `angel-`.
fn crates_in(cell: &str) -> BTreeSet<String> {
    cell.split('`')
        .skip(1)
        .step_by(2)
        .filter(|name| name.starts_with("angel-"))
        .map(str::to_string)
        .collect()
}

/// The layer table's rows: folder -> (package, the crates it depends on).
fn layer_table() -> BTreeMap<String, (String, BTreeSet<String>)> {
    let doc = read(&root().join("docs/architecture.md"));
    let mut rows = BTreeMap::new();
    let mut in_table = false;
    for line in doc.lines() {
        if line.starts_with("| layer | crate | depends on (ours) |") {
            in_table = true;
            continue;
        }
        if !in_table || line.starts_with("|---") {
            continue;
        }
        if !line.starts_with('|') {
            break;
        }
        let cells: Vec<&str> = line.split('|').map(str::trim).collect();
        let folder = cells[1].trim_matches('`').trim_end_matches('/').to_string();
        let package = cells[2].trim_matches('`').to_string();
        rows.insert(folder, (package, crates_in(cells[3])));
    }
    rows
}

/// A crate's package name and its normal dependencies among ours, from its `Cargo.toml`.
fn manifest(folder: &str) -> (String, BTreeSet<String>) {
    let text = read(&root().join(folder).join("Cargo.toml"));
    let (mut section, mut name, mut deps) = (String::new(), String::new(), BTreeSet::new());
    for line in text.lines().map(str::trim) {
        if line.starts_with('[') {
            section = line.to_string();
        } else if section == "[package]" && line.starts_with("name") {
            name = line.split('"').nth(1).unwrap_or_default().to_string();
        } else if section == "[dependencies]" && line.starts_with("angel-") {
            let dep = line.split(['.', ' ', '=']).next().unwrap_or_default();
            deps.insert(dep.to_string());
        }
    }
    (name, deps)
}

#[test]
fn the_layer_table_lists_every_crate_and_exactly_its_dependencies() {
    let table = layer_table();
    let members = members();
    assert!(members.len() >= 10, "members: {members:?}");
    let mut wrong = Vec::new();
    for folder in &members {
        let (package, deps) = manifest(folder);
        match table.get(folder) {
            None => wrong.push(format!(
                "{folder}/ ({package}) has no row in the layer table"
            )),
            Some((named, listed)) if *named != package || *listed != deps => wrong.push(format!(
                "{folder}/: the table says {named} depends on {listed:?}; Cargo.toml says \
                 {package} depends on {deps:?}"
            )),
            Some(_) => {}
        }
    }
    for folder in table.keys().filter(|f| !members.contains(f)) {
        wrong.push(format!(
            "the layer table has {folder}/, which is no workspace member"
        ));
    }
    assert!(
        wrong.is_empty(),
        "docs/architecture.md's layer table is out of date:\n{}",
        wrong.join("\n")
    );
}

/// The `.rs` files under `dir`, recursively.
fn sources(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            sources(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The modules a file declares in files of their own (`mod name;`, any visibility).
fn declared_modules(text: &str) -> Vec<String> {
    text.lines()
        .map(str::trim)
        .filter_map(|line| {
            let rest = line.strip_prefix("pub ").unwrap_or(line);
            let rest = match rest.strip_prefix("pub(") {
                Some(r) => r.split_once(") ").map_or(r, |(_, r)| r),
                None => rest,
            };
            let name = rest.strip_prefix("mod ")?.strip_suffix(';')?;
            Some(name.trim().to_string())
        })
        .collect()
}

/// Whether `word` appears in `text` as a whole word (letters, digits and `_`).
fn names(text: &str, word: &str) -> bool {
    text.split(|c: char| !(c.is_alphanumeric() || c == '_'))
        .any(|w| w == word)
}

#[test]
fn every_module_is_named_in_the_layout_comment_of_the_file_declaring_it() {
    let mut files = Vec::new();
    for folder in members() {
        sources(&root().join(folder).join("src"), &mut files);
    }
    assert!(files.len() > 100, "{} source files", files.len());
    let mut unnamed = Vec::new();
    for file in &files {
        let text = read(file);
        let layout: String = (text.lines())
            .filter(|l| l.starts_with("//!"))
            .collect::<Vec<_>>()
            .join("\n");
        for module in declared_modules(&text) {
            if !names(&layout, &module) {
                let file = file.strip_prefix(root()).unwrap_or(file);
                unnamed.push(format!("{}: mod {module}", file.display()));
            }
        }
    }
    assert!(
        unnamed.is_empty(),
        "modules missing from their parent's //! layout comment:\n{}",
        unnamed.join("\n")
    );
}

/// The module path of `file` in its crate's `src`: `a/b.rs` and `a/b/mod.rs` are `a::b`,
/// `lib.rs` the root.
fn module_of(src: &Path, file: &Path) -> Vec<String> {
    let rel = file
        .strip_prefix(src)
        .expect("under src")
        .with_extension("");
    let mut parts: Vec<String> = rel
        .iter()
        .map(|p| p.to_string_lossy().into_owned())
        .collect();
    if matches!(parts.last().map(String::as_str), Some("mod" | "lib")) {
        parts.pop();
    }
    parts
}

/// A file's code without its comments and its test module (`#[cfg(test)] mod`, at the end).
fn code_of(text: &str) -> String {
    let text = match text.find("#[cfg(test)]\nmod ") {
        Some(at) => &text[..at],
        None => text,
    };
    let lines = text
        .lines()
        .map(|l| match l.trim_start().starts_with("//") {
            true => "",
            false => l,
        });
    lines.collect::<Vec<_>>().join("\n")
}

/// The paths a use tree names: `a::{b::C, d}` is `a::b::C` and `a::d`.
fn use_paths(tree: &str) -> Vec<String> {
    let tree = tree.trim();
    let Some(open) = tree.find('{') else {
        let path = tree.split(" as ").next().unwrap_or(tree);
        return vec![path.trim().trim_end_matches("::").to_string()];
    };
    let close = tree.rfind('}').filter(|&c| c > open).unwrap_or(tree.len());
    let (prefix, inner) = (&tree[..open], &tree[open + 1..close]);
    let (mut parts, mut depth, mut start) = (Vec::new(), 0, 0);
    for (i, c) in inner.char_indices() {
        match c {
            '{' => depth += 1,
            '}' => depth -= 1,
            ',' if depth == 0 => {
                parts.push(&inner[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    parts.push(&inner[start..]);
    (parts.into_iter().filter(|p| !p.trim().is_empty()))
        .flat_map(use_paths)
        .map(|p| match p.as_str() {
            "self" => prefix.trim_end_matches("::").to_string(),
            _ => format!("{prefix}{p}"),
        })
        .collect()
}

/// The crate paths `code` (of module `at`) names: its `use` trees and the paths it writes out
/// (`crate::a::f()`), as module paths from the crate's root.
fn named_paths(at: &[String], code: &str) -> Vec<Vec<String>> {
    let flat: String = code.split_whitespace().collect::<Vec<_>>().join(" ");
    let mut paths = Vec::new();
    for statement in flat.split(';') {
        let starts = (statement.match_indices("use "))
            .map(|(i, _)| i)
            .filter(|&i| {
                let before = statement[..i].chars().next_back();
                !before.is_some_and(|c| c.is_alphanumeric() || c == '_')
            });
        if let Some(i) = starts.last() {
            paths.extend(use_paths(&statement[i + 4..]));
        }
    }
    let mut rest = flat.as_str();
    let next = |s: &str| {
        [s.find("crate::"), s.find("super::")]
            .into_iter()
            .flatten()
            .min()
    };
    while let Some(i) = next(rest) {
        let path: String = (rest[i..].chars())
            .take_while(|c| c.is_alphanumeric() || *c == '_' || *c == ':')
            .collect();
        // `crate::{a, b}` is a use tree, read above.
        if !path.ends_with("::") {
            paths.push(path);
        }
        rest = &rest[i + 7..];
    }
    paths
        .into_iter()
        .filter_map(|p| {
            let segs: Vec<&str> = p.split("::").filter(|s| !s.is_empty()).collect();
            let mut module: Vec<String> = match segs.first() {
                Some(&"crate") => Vec::new(),
                Some(&"super" | &"self") => at.to_vec(),
                _ => return None,
            };
            let mut segs = &segs[..];
            if segs[0] == "crate" {
                segs = &segs[1..];
            }
            while let Some((&first, rest)) = segs.split_first() {
                match first {
                    "super" => drop(module.pop()),
                    "self" => {}
                    _ => break,
                }
                segs = rest;
            }
            module.extend(segs.iter().map(|s| s.to_string()));
            Some(module)
        })
        .collect()
}

/// The circles of a crate's module imports: each a list of two or more files (by module
/// path) that import each other round, through the files its imports resolve to.
fn import_circles(src: &Path) -> Vec<Vec<String>> {
    let mut files = Vec::new();
    sources(src, &mut files);
    files.retain(|f| !f.ends_with("main.rs"));
    let modules: BTreeMap<Vec<String>, PathBuf> = files
        .iter()
        .map(|f| (module_of(src, f), f.clone()))
        .collect();
    let mut edges: BTreeMap<Vec<String>, BTreeSet<Vec<String>>> = BTreeMap::new();
    for (module, file) in &modules {
        let code = code_of(&read(file));
        for mut path in named_paths(module, &code) {
            while !modules.contains_key(&path) {
                path.pop();
            }
            if &path != module {
                edges.entry(module.clone()).or_default().insert(path);
            }
        }
    }
    // A file is in a circle with those it reaches that reach it back.
    let reach = |from: &Vec<String>| {
        let (mut seen, mut todo) = (BTreeSet::new(), vec![from.clone()]);
        while let Some(m) = todo.pop() {
            for next in edges.get(&m).into_iter().flatten() {
                if seen.insert(next.clone()) {
                    todo.push(next.clone());
                }
            }
        }
        seen
    };
    let reached: BTreeMap<_, _> = modules.keys().map(|m| (m.clone(), reach(m))).collect();
    let mut circles: Vec<Vec<String>> = Vec::new();
    for (m, from_m) in &reached {
        if !from_m.contains(m) || circles.iter().any(|c| c.contains(&m.join("::"))) {
            continue;
        }
        let circle = (from_m.iter())
            .filter(|o| reached[*o].contains(m))
            .map(|o| o.join("::"))
            .collect();
        circles.push(circle);
    }
    circles
}

#[test]
fn no_crate_has_import_circles_but_the_two_pairs_the_docs_name() {
    let mut found = Vec::new();
    for folder in members() {
        for circle in import_circles(&root().join(&folder).join("src")) {
            found.push(format!("{folder}: {}", circle.join(" <-> ")));
        }
    }
    let pairs = [
        "ps-service: telemetry::counted_body <-> telemetry::rpc_layer",
        "storage: runtime <-> stores",
    ];
    // The two pairs found prove the check sees circles; a third is a layering fault.
    found.sort();
    assert_eq!(
        found, pairs,
        "module import circles (docs/architecture.md, \"Layers inside a crate\")"
    );
}

#[test]
fn the_checks_see_what_they_check() {
    assert_eq!(
        use_paths("crate::a::{self, b::{C, D}, e as f}"),
        [
            "crate::a",
            "crate::a::b::C",
            "crate::a::b::D",
            "crate::a::e"
        ]
    );
    let at = vec!["x".to_string(), "y".to_string()];
    assert_eq!(
        named_paths(&at, "use super::z::W;\nfn f() { crate::q::g() }"),
        [vec!["x", "z", "W"], vec!["x", "z", "W"], vec!["q", "g"]]
    );
    assert_eq!(
        declared_modules("pub mod a;\nmod b;\npub(crate) mod c;\npub(super) mod d;\nmod e {"),
        ["a", "b", "c", "d"]
    );
    assert!(names("- [`kept`]: x", "kept") && !names("kept_table", "kept"));
    assert_eq!(
        crates_in("`angel-proto`, `angel-optim` (and `tokio`)"),
        BTreeSet::from(["angel-optim".to_string(), "angel-proto".to_string()])
    );
}
