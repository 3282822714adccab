//! Turning files, folders and strings into documents: YAML streams (`---`), JSON (one or more
//! concatenated values), and the objects inside `kind: List` documents.

use crate::error::ManifestError;
use crate::fields::At;
use crate::notes::Notes;
use crate::rules::validate;
use serde_json::Value;
use std::collections::BTreeSet;
use std::io::Read;
use std::path::{Path, PathBuf};

/// One document of a file, converted to JSON values (whose maps are what [`crate::fields::At`]
/// reads).
#[derive(Debug, Clone)]
pub(crate) struct Document {
    pub file: String,
    /// 1-based.
    pub index: usize,
    pub value: Value,
}

/// One Kubernetes object: a document, or an item of a `kind: List` document.
#[derive(Debug, Clone)]
pub(crate) struct Object<'a> {
    pub file: &'a str,
    pub document: usize,
    /// Where the object sits in its document: empty, or `items[3]` (nested: `items[0].items[2]`).
    pub prefix: String,
    pub value: &'a Value,
    /// Kind and apiVersion to assume when the object does not say (items of a typed list such as
    /// `PodList`, which the API server prints without them).
    pub implied: Option<(String, String)>,
}

/// The files named by `paths`: files as given, folders walked recursively for the files whose
/// names `wanted` accepts (sorted, hidden entries skipped). `-` stands for standard input.
pub(crate) fn expand_paths(
    paths: &[PathBuf],
    wanted: fn(&str) -> bool,
) -> Result<Vec<PathBuf>, ManifestError> {
    let mut out = Vec::new();
    let mut seen_dirs = BTreeSet::new();
    for path in paths {
        if path.as_os_str() == "-" {
            out.push(path.clone());
            continue;
        }
        let meta = std::fs::metadata(path).map_err(|source| ManifestError::Io {
            path: path.clone(),
            source,
        })?;
        if meta.is_dir() {
            walk(path, wanted, &mut seen_dirs, &mut out)?;
        } else {
            out.push(path.clone());
        }
    }
    Ok(out)
}

fn walk(
    dir: &Path,
    wanted: fn(&str) -> bool,
    seen: &mut BTreeSet<PathBuf>,
    out: &mut Vec<PathBuf>,
) -> Result<(), ManifestError> {
    let io = |source| ManifestError::Io {
        path: dir.to_path_buf(),
        source,
    };
    // Symlinked folders can form cycles; visit each real folder once.
    let real = std::fs::canonicalize(dir).map_err(io)?;
    if !seen.insert(real) {
        return Ok(());
    }
    let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)
        .map_err(io)?
        .map(|e| e.map(|e| e.path()))
        .collect::<Result<_, _>>()
        .map_err(io)?;
    entries.sort();
    for entry in entries {
        let name = entry
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        if name.starts_with('.') {
            continue;
        }
        let meta = std::fs::metadata(&entry).map_err(|source| ManifestError::Io {
            path: entry.clone(),
            source,
        })?;
        if meta.is_dir() {
            walk(&entry, wanted, seen, out)?;
        } else if wanted(&name) {
            out.push(entry);
        }
    }
    Ok(())
}

/// `*.yaml`, `*.yml` and `*.json`.
pub(crate) fn is_manifest_name(name: &str) -> bool {
    let lower = name.to_ascii_lowercase();
    lower.ends_with(".yaml") || lower.ends_with(".yml") || lower.ends_with(".json")
}

/// Reads a file (or standard input for `-`).
pub(crate) fn read(path: &Path) -> Result<String, ManifestError> {
    let io = |source| ManifestError::Io {
        path: path.to_path_buf(),
        source,
    };
    if path.as_os_str() == "-" {
        let mut text = String::new();
        std::io::stdin().read_to_string(&mut text).map_err(io)?;
        Ok(text)
    } else {
        std::fs::read_to_string(path).map_err(io)
    }
}

/// Splits `text` into documents. Sources named `*.json` are read as JSON; anything else as a
/// YAML stream. Empty and `null` documents are dropped.
pub(crate) fn documents(source: &str, text: &str) -> Result<Vec<Document>, ManifestError> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let values = if source.to_ascii_lowercase().ends_with(".json") {
        json_documents(source, text)?
    } else {
        yaml_documents(source, text)?
    };
    Ok(values
        .into_iter()
        .enumerate()
        .filter(|(_, v)| !v.is_null())
        .map(|(i, value)| Document {
            file: source.to_string(),
            index: i + 1,
            value,
        })
        .collect())
}

fn json_documents(source: &str, text: &str) -> Result<Vec<Value>, ManifestError> {
    let mut out = Vec::new();
    for value in serde_json::Deserializer::from_str(text).into_iter::<Value>() {
        let value = value.map_err(|e| ManifestError::Yaml {
            file: source.to_string(),
            document: out.len() + 1,
            reason: e.to_string(),
        })?;
        out.push(value);
    }
    Ok(out)
}

/// How deep a document may nest. Kubernetes objects rarely pass 20 levels (a CRD's schema
/// perhaps 40); 128 is serde_json's own limit, so YAML and JSON refuse the same documents, and
/// both do so as soon as the parser gets there (a YAML document nested 100,000 levels deep took
/// 37 s to refuse with the old reader).
pub const MAX_DEPTH: usize = 128;

/// The parser's budget: nesting as [`MAX_DEPTH`]; counts far above any cluster's dump (a
/// million documents, 50 million nodes, 1 GiB of scalar text) so that only hostile input hits
/// them; the library's defaults for aliases, whose expansion is the classic YAML bomb.
fn options() -> serde_saphyr::Options {
    serde_saphyr::options! {
        budget: serde_saphyr::budget! {
            max_depth: MAX_DEPTH,
            max_documents: 1_000_000,
            max_nodes: 50_000_000,
            max_events: 200_000_000,
            max_total_scalar_bytes: 1 << 30,
        },
        // YAML 1.2 booleans only (`yes` stays a string), as the old reader and JSON have it.
        strict_booleans: true,
        // `.nan` and `.inf` become the strings ".nan" and ".inf": a quantity or integer field
        // then refuses them naming the object and field, instead of JSON's null (absent).
        non_finite_float_policy: serde_saphyr::options::NonFiniteFloatPolicy::AsString,
        with_snippet: false,
    }
}

/// The stack the YAML parser runs on. Its recursion costs up to 25 KiB a level in a debug
/// build, so [`MAX_DEPTH`] levels need about 3 MiB: more than a test's or a tokio worker's
/// 2 MiB thread has, hence a thread of its own.
const PARSER_STACK: usize = 32 << 20;

/// Streams at least this large are parsed in pieces, one per core (see [`parse_in_pieces`]).
const PIECE_BYTES: usize = 1 << 20;

/// Where `text` can be cut into about `n` pieces of equal size, each a whole number of
/// documents: before a line that starts a document (`---` alone or followed by a space or tab).
/// YAML forbids such a line inside any scalar (`c-forbidden`), so the cut never splits one.
/// No cuts when the stream has a directive (`%YAML`, `%TAG`): it belongs to the document after
/// it, which a cut would part it from.
fn cuts(text: &str, n: usize) -> Vec<usize> {
    let bytes = text.as_bytes();
    if bytes.first() == Some(&b'%') || text.contains("\n%") {
        return Vec::new();
    }
    let mut out: Vec<usize> = Vec::new();
    for k in 1..n {
        let target = (bytes.len() * k / n).max(out.last().map_or(0, |&c| c + 1));
        // The first line that starts at or after `target`.
        let Some(mut i) = target
            .checked_sub(1)
            .and_then(|t| bytes.get(t..))
            .and_then(|rest| rest.iter().position(|&b| b == b'\n'))
            .map(|p| target + p)
        else {
            break;
        };
        while i < bytes.len() {
            let end = bytes[i..]
                .iter()
                .position(|&b| b == b'\n')
                .map_or(bytes.len(), |p| i + p);
            if std::str::from_utf8(&bytes[i..end])
                .is_ok_and(|l| is_document_marker(l.trim_end_matches('\r')))
            {
                out.push(i);
                break;
            }
            i = end + 1;
        }
    }
    out
}

/// The documents of a large stream, its pieces (see [`cuts`]) parsed at once on threads of
/// their own; None when it is small, cannot be cut, or a piece fails (the whole stream is
/// then parsed as one, so that an error names its document and line as before). Each piece
/// has the whole stream's budget, so a stream in `n` pieces may hold up to `n` times its
/// document and node counts; the depth limit, per document, is the same.
fn parse_in_pieces(text: &str, n: usize) -> Option<Vec<Value>> {
    let cuts = cuts(text, n);
    if cuts.is_empty() {
        return None;
    }
    let mut pieces = Vec::with_capacity(cuts.len() + 1);
    let mut start = 0;
    for &c in &cuts {
        pieces.push(text.get(start..c)?);
        start = c;
    }
    pieces.push(text.get(start..)?);
    std::thread::scope(|s| {
        let handles: Vec<_> = pieces
            .iter()
            .map(|piece| {
                std::thread::Builder::new()
                    .name("yaml".to_string())
                    .stack_size(PARSER_STACK)
                    .spawn_scoped(s, move || {
                        serde_saphyr::from_multiple_with_options::<Value>(piece, options())
                    })
                    .ok()
            })
            .collect();
        let mut out = Vec::new();
        for handle in handles {
            out.extend(handle?.join().ok()?.ok()?);
        }
        Some(out)
    })
}

fn yaml_documents(source: &str, text: &str) -> Result<Vec<Value>, ManifestError> {
    let cores = std::thread::available_parallelism().map_or(1, usize::from);
    let pieces = cores.min(text.len() / PIECE_BYTES);
    if pieces > 1 {
        if let Some(values) = parse_in_pieces(text, pieces) {
            return Ok(values);
        }
    }
    let parse = || serde_saphyr::from_multiple_with_options::<Value>(text, options());
    let parsed = std::thread::scope(|s| {
        std::thread::Builder::new()
            .name("yaml".to_string())
            .stack_size(PARSER_STACK)
            .spawn_scoped(s, parse)
            .ok()
            .map(|handle| handle.join())
    });
    let parsed = match parsed {
        Some(Ok(result)) => result,
        // The parser is panic-free by design; if it panicked anyway, say so as a YAML error.
        Some(Err(_)) => {
            return Err(ManifestError::Yaml {
                file: source.to_string(),
                document: 1,
                reason: "the YAML parser failed on this input".to_string(),
            })
        }
        // No thread to be had: parse here (the limit still holds, on a smaller stack).
        None => parse(),
    };
    parsed.map_err(|e| {
        let document = e
            .location()
            .map_or(1, |l| document_at_line(text, l.line() as usize));
        let reason = match &e {
            serde_saphyr::Error::Budget {
                breach: serde_saphyr::budget::BudgetBreach::Depth { .. },
                location,
            } => format!(
                "nested deeper than {MAX_DEPTH} levels (dovetail's limit) at line {}, column {}",
                location.line(),
                location.column()
            ),
            _ => e.to_string(),
        };
        ManifestError::Yaml {
            file: source.to_string(),
            document,
            reason,
        }
    })
}

/// Parses one YAML (or JSON: YAML's flow style reads it) document into a JSON value, with the
/// limits and conversions of the manifest reader. For files that are not manifests (a
/// simulator config); `source` names it in errors.
pub fn yaml_value(source: &str, text: &str) -> Result<Value, ManifestError> {
    let mut docs = yaml_documents(source, text)?;
    match docs.len() {
        0 => Ok(Value::Null),
        1 => Ok(docs.remove(0)),
        n => Err(ManifestError::Yaml {
            file: source.to_string(),
            document: 2,
            reason: format!("expected one document, found {n}"),
        }),
    }
}

/// Parses a YAML stream into its documents (empty and `null` ones left out), as the manifest
/// reader does.
pub fn yaml_stream(source: &str, text: &str) -> Result<Vec<Value>, ManifestError> {
    yaml_documents(source, text)
}

/// Whether a line (without its line break) starts a document: `---` alone or followed by a
/// space or tab.
fn is_document_marker(line: &str) -> bool {
    line == "---" || line.starts_with("--- ") || line.starts_with("---\t")
}

/// The 1-based document of a stream that `line` (1-based) falls in: one more than the `---`
/// separators above it, not counting one that opens the stream.
fn document_at_line(text: &str, line: usize) -> usize {
    let mut document = 1;
    let mut content_seen = false;
    for l in text.lines().take(line.saturating_sub(1)) {
        let is_marker = is_document_marker(l);
        if is_marker && content_seen {
            document += 1;
        }
        if is_marker || !(l.trim().is_empty() || l.starts_with('#') || l.starts_with('%')) {
            content_seen = true;
        }
    }
    document
}

/// The objects in a document: the document itself, or the items of a list (`kind: List`, or a
/// typed list such as `PodList`), recursively. A list's `items` must be a list of objects (the
/// [`crate::rules`] table's `List` rules).
pub(crate) fn objects(doc: &Document) -> Result<Vec<Object<'_>>, ManifestError> {
    let mut out = Vec::new();
    push_objects(doc, &doc.value, String::new(), None, &mut out)?;
    Ok(out)
}

fn push_objects<'a>(
    doc: &'a Document,
    value: &'a Value,
    prefix: String,
    implied: Option<(String, String)>,
    out: &mut Vec<Object<'a>>,
) -> Result<(), ManifestError> {
    let kind = value.get("kind").and_then(Value::as_str);
    if let Some(kind) = kind.filter(|k| k.ends_with("List") && value.get("items").is_some()) {
        let root = At::root(value, &prefix);
        let mut notes = Notes::new(kind);
        validate("List", &root, &mut notes).map_err(|e| ManifestError::Field {
            file: doc.file.clone(),
            document: doc.index,
            kind: "List",
            object: value
                .get("metadata")
                .and_then(|m| m.get("name"))
                .and_then(Value::as_str)
                .unwrap_or("<unnamed>")
                .to_string(),
            field: e.field,
            reason: e.reason,
        })?;
        // A typed list's items omit kind and apiVersion; they are the list's, minus "List".
        let item_kind = kind.strip_suffix("List").unwrap_or_default();
        let implied = (!item_kind.is_empty()).then(|| {
            let api = value
                .get("apiVersion")
                .and_then(Value::as_str)
                .unwrap_or_default();
            (item_kind.to_string(), api.to_string())
        });
        let items = value.get("items").and_then(Value::as_array);
        for (i, item) in items.into_iter().flatten().enumerate() {
            if item.is_null() {
                continue;
            }
            let sep = if prefix.is_empty() { "" } else { "." };
            push_objects(
                doc,
                item,
                format!("{prefix}{sep}items[{i}]"),
                implied.clone(),
                out,
            )?;
        }
        return Ok(());
    }
    out.push(Object {
        file: &doc.file,
        document: doc.index,
        prefix,
        value,
        implied,
    });
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn multi_document_yaml_skips_empty_documents_and_keeps_numbering() {
        let text = "---\n# only a comment\n---\nkind: Pod\n---\n\n---\nkind: Node\n...\n";
        let docs = documents("x.yaml", text).unwrap();
        let kinds: Vec<(usize, &str)> = docs
            .iter()
            .map(|d| (d.index, d.value["kind"].as_str().unwrap()))
            .collect();
        assert_eq!(kinds.len(), 2);
        assert_eq!(kinds[0].1, "Pod");
        assert_eq!(kinds[1].1, "Node");
        assert!(kinds[0].0 < kinds[1].0);
    }

    #[test]
    fn a_stream_parsed_in_pieces_gives_the_documents_of_one_parse() {
        let streams = [
            "a: 1\n---\nb: 2\n---\nc: 3\n",
            "---\na: 1\n---\n---\n# comment\n---\nb: &x {k: v}\nc: *x\n...\n---\nd: 4\n",
            "a: |\n  ---x\n  --- indented\n---x: 1\n--- \nb: 2\r\n---\r\nc: 3\r\n",
            "--- {a: 1}\n--- [1, 2]\n--- plain\n---\n",
            "a: \"\u{e9}\u{e9}\u{e9}\"\n---\nb: \"\u{1f600}\"\n---\nc: 1\n",
        ];
        for text in streams {
            let whole = serde_saphyr::from_multiple_with_options::<Value>(text, options()).unwrap();
            for n in 2..=7 {
                if let Some(pieces) = parse_in_pieces(text, n) {
                    assert_eq!(pieces, whole, "{n} pieces of {text:?}");
                }
            }
            assert!(parse_in_pieces(text, 3).is_some(), "{text:?} was not cut");
        }
        // A directive belongs to the document after it: such a stream is not cut.
        assert!(cuts("%YAML 1.2\n---\na: 1\n---\nb: 2\n", 2).is_empty());
        assert!(cuts("a: 1\n---\n%YAML 1.2\n---\nb: 2\n", 2).is_empty());
        // A piece that fails leaves the error to the whole stream's parse.
        assert!(parse_in_pieces("a: 1\n---\nb: [unclosed\n---\nc: 3\n", 3).is_none());
    }

    #[test]
    fn yaml_syntax_errors_name_the_document() {
        let err = documents("bad.yaml", "kind: Pod\n---\nkind: [unclosed\n").unwrap_err();
        let text = err.to_string();
        assert!(text.starts_with("bad.yaml: document 2: "), "{text}");
    }

    #[test]
    fn merge_keys_and_scalar_keys_are_resolved() {
        let text = "base: &b {a: 1}\nderived:\n  <<: *b\n  c: 2\n3: three\n";
        let docs = documents("m.yaml", text).unwrap();
        assert_eq!(docs[0].value["derived"]["a"], 1);
        assert_eq!(docs[0].value["3"], "three");
    }

    #[test]
    fn json_streams_are_read() {
        let docs = documents("a.json", "{\"kind\":\"Pod\"} {\"kind\":\"Node\"}").unwrap();
        assert_eq!(docs.len(), 2);
        assert_eq!(docs[1].index, 2);
    }

    #[test]
    fn typed_lists_imply_kind_of_items() {
        let docs = documents(
            "l.yaml",
            "apiVersion: v1\nkind: PodList\nitems:\n- metadata: {name: a}\n- kind: List\n  items:\n  - kind: Node\n",
        )
        .unwrap();
        let objs = objects(&docs[0]).unwrap();
        assert_eq!(objs.len(), 2);
        assert_eq!(objs[0].prefix, "items[0]");
        assert_eq!(objs[0].implied, Some(("Pod".to_string(), "v1".to_string())));
        assert_eq!(objs[1].prefix, "items[1].items[0]");
    }
}
