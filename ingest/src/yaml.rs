//! Turning files, folders and strings into documents: YAML streams (`---`), JSON (one or more
//! concatenated values), and the objects inside `kind: List` documents.

use crate::error::ManifestError;
use serde::Deserialize;
use serde_json::{Map, Number, Value};
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

fn yaml_documents(source: &str, text: &str) -> Result<Vec<Value>, ManifestError> {
    let mut out = Vec::new();
    for de in serde_yaml::Deserializer::from_str(text) {
        let document = out.len() + 1;
        let err = |reason: String| ManifestError::Yaml {
            file: source.to_string(),
            document,
            reason,
        };
        // The deserializer keeps yielding the same error once the stream is broken, so the
        // first error ends the loop (by returning).
        let mut value = serde_yaml::Value::deserialize(de).map_err(|e| err(e.to_string()))?;
        // `<<: *anchor` merge keys are YAML 1.1; resolve them as kubectl does.
        value.apply_merge().map_err(|e| err(e.to_string()))?;
        out.push(to_json(value).map_err(err)?);
    }
    Ok(out)
}

/// Converts a YAML value to JSON. Scalar keys become strings (`1: x` -> `"1"`); tags are dropped.
fn to_json(value: serde_yaml::Value) -> Result<Value, String> {
    use serde_yaml::Value as Y;
    Ok(match value {
        Y::Null => Value::Null,
        Y::Bool(b) => Value::Bool(b),
        Y::Number(n) => {
            if let Some(i) = n.as_i64() {
                Value::Number(i.into())
            } else if let Some(u) = n.as_u64() {
                Value::Number(u.into())
            } else {
                let f = n.as_f64().unwrap_or(f64::NAN);
                Value::Number(
                    Number::from_f64(f).ok_or_else(|| format!("{n} is not a finite number"))?,
                )
            }
        }
        Y::String(s) => Value::String(s),
        Y::Sequence(items) => {
            Value::Array(items.into_iter().map(to_json).collect::<Result<_, _>>()?)
        }
        Y::Mapping(map) => {
            let mut out = Map::new();
            for (k, v) in map {
                let key = match k {
                    Y::String(s) => s,
                    Y::Bool(b) => b.to_string(),
                    Y::Number(n) => n.to_string(),
                    Y::Null => "null".to_string(),
                    other => return Err(format!("mapping key {other:?} is not a scalar")),
                };
                out.insert(key, to_json(v)?);
            }
            Value::Object(out)
        }
        Y::Tagged(tagged) => to_json(tagged.value)?,
    })
}

/// The objects in a document: the document itself, or the items of a list (`kind: List`, or a
/// typed list such as `PodList`), recursively.
pub(crate) fn objects(doc: &Document) -> Vec<Object<'_>> {
    let mut out = Vec::new();
    push_objects(doc, &doc.value, String::new(), None, &mut out);
    out
}

fn push_objects<'a>(
    doc: &'a Document,
    value: &'a Value,
    prefix: String,
    implied: Option<(String, String)>,
    out: &mut Vec<Object<'a>>,
) {
    let kind = value.get("kind").and_then(Value::as_str);
    let items = value.get("items").and_then(Value::as_array);
    if let (Some(kind), Some(items)) = (kind, items) {
        if kind.ends_with("List") {
            // A typed list's items omit kind and apiVersion; they are the list's, minus "List".
            let item_kind = kind.strip_suffix("List").unwrap_or_default();
            let implied = (!item_kind.is_empty()).then(|| {
                let api = value
                    .get("apiVersion")
                    .and_then(Value::as_str)
                    .unwrap_or_default();
                (item_kind.to_string(), api.to_string())
            });
            for (i, item) in items.iter().enumerate() {
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
                );
            }
            return;
        }
    }
    out.push(Object {
        file: &doc.file,
        document: doc.index,
        prefix,
        value,
        implied,
    });
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
        let objs = objects(&docs[0]);
        assert_eq!(objs.len(), 2);
        assert_eq!(objs[0].prefix, "items[0]");
        assert_eq!(objs[0].implied, Some(("Pod".to_string(), "v1".to_string())));
        assert_eq!(objs[1].prefix, "items[1].items[0]");
    }
}
