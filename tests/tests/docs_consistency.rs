//! Checks that keep the architecture docs true to the code: the layer table of
//! `docs/architecture.md` lists exactly each crate's dependencies among ours, and every module
//! is named in the layout comment (`//!`) of the file that declares it.

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

#[test]
fn the_checks_see_what_they_check() {
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
