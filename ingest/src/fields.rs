//! Typed, path-tracking access to a document parsed as [`serde_json::Value`].
//!
//! Manifests are read through [`At`] rather than deserialized into structs so that every error
//! can name the exact field (`spec.containers[0].resources.requests.cpu`) and so that unknown
//! fields, which real manifests are full of, cost nothing.

use crate::error::{FieldError, FieldResult};
use dovetail_dataflow::model::{parse_quantity, Milli};
use serde_json::{Map, Value};
use std::collections::BTreeMap;

/// A value inside a document, with the path that leads to it.
#[derive(Debug, Clone)]
pub(crate) struct At<'a> {
    value: &'a Value,
    path: String,
}

/// Appends `key` to `path`, quoting keys that contain dots or slashes so the path stays
/// unambiguous (`requests["nvidia.com/gpu"]`).
fn join(path: &str, key: &str) -> String {
    let plain = !key.is_empty()
        && key
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
    match (path.is_empty(), plain) {
        (true, true) => key.to_string(),
        (false, true) => format!("{path}.{key}"),
        (_, false) => format!("{path}[{key:?}]"),
    }
}

impl<'a> At<'a> {
    /// The root of a document. `prefix` is the path of the object inside its document: empty for
    /// a top-level object, `items[3]` for an item of a `kind: List`.
    pub fn root(value: &'a Value, prefix: &str) -> At<'a> {
        At {
            value,
            path: prefix.to_string(),
        }
    }

    pub fn value(&self) -> &'a Value {
        self.value
    }

    pub fn path(&self) -> &str {
        &self.path
    }

    /// An error about this value.
    pub fn err(&self, reason: impl Into<String>) -> FieldError {
        let field = if self.path.is_empty() {
            "(document)".to_string()
        } else {
            self.path.clone()
        };
        FieldError::new(field, reason)
    }

    /// An error about the field `key` of this object (which may be missing).
    pub fn err_at(&self, key: &str, reason: impl Into<String>) -> FieldError {
        FieldError::new(join(&self.path, key), reason)
    }

    fn map(&self) -> FieldResult<&'a Map<String, Value>> {
        self.value.as_object().ok_or_else(|| {
            self.err(format!(
                "expected an object, found {}",
                describe(self.value)
            ))
        })
    }

    /// The field `key`; `None` when absent or `null` (Kubernetes treats both alike).
    pub fn get(&self, key: &str) -> FieldResult<Option<At<'a>>> {
        Ok(self
            .map()?
            .get(key)
            .filter(|v| !v.is_null())
            .map(|value| At {
                value,
                path: join(&self.path, key),
            }))
    }

    /// The field `key`, which must be present.
    pub fn require(&self, key: &str) -> FieldResult<At<'a>> {
        self.get(key)?
            .ok_or_else(|| self.err_at(key, "required field is missing"))
    }

    /// The object at `key`, if present.
    pub fn obj(&self, key: &str) -> FieldResult<Option<At<'a>>> {
        match self.get(key)? {
            Some(child) => {
                child.map()?;
                Ok(Some(child))
            }
            None => Ok(None),
        }
    }

    /// The object at `key`, which must be present.
    pub fn req_obj(&self, key: &str) -> FieldResult<At<'a>> {
        let child = self.require(key)?;
        child.map()?;
        Ok(child)
    }

    /// Follows a chain of object fields; `None` as soon as one is absent.
    pub fn dig(&self, keys: &[&str]) -> FieldResult<Option<At<'a>>> {
        let mut at = self.clone();
        for key in keys {
            match at.obj(key)? {
                Some(next) => at = next,
                None => return Ok(None),
            }
        }
        Ok(Some(at))
    }

    /// This value as a string. Numbers and booleans are accepted and written out, since YAML
    /// turns an unquoted `1.0` or `true` into one and the intent is plain.
    pub fn as_string(&self) -> FieldResult<String> {
        match self.value {
            Value::String(s) => Ok(s.clone()),
            Value::Number(n) => Ok(n.to_string()),
            Value::Bool(b) => Ok(b.to_string()),
            other => Err(self.err(format!("expected a string, found {}", describe(other)))),
        }
    }

    /// This value as a non-negative quantity in milli-units (`250m`, `1Gi`, `2`).
    pub fn as_quantity(&self) -> FieldResult<Milli> {
        let text = match self.value {
            Value::String(s) => s.clone(),
            Value::Number(n) => n.to_string(),
            other => {
                return Err(self.err(format!("expected a quantity, found {}", describe(other))))
            }
        };
        let q = parse_quantity(&text).map_err(|e| self.err(e.to_string()))?;
        if q < 0 {
            return Err(self.err(format!("quantity {text:?} must not be negative")));
        }
        Ok(q)
    }

    /// This value as an integer.
    pub fn as_i64(&self) -> FieldResult<i64> {
        match self.value {
            Value::Number(n) => n
                .as_i64()
                .or_else(|| {
                    n.as_f64()
                        .filter(|f| f.fract() == 0.0 && f.abs() < 9.0e15)
                        .map(|f| f as i64)
                })
                .ok_or_else(|| self.err(format!("expected an integer, found {n}"))),
            other => Err(self.err(format!("expected an integer, found {}", describe(other)))),
        }
    }

    pub fn str(&self, key: &str) -> FieldResult<Option<String>> {
        self.get(key)?.map(|v| v.as_string()).transpose()
    }

    pub fn req_str(&self, key: &str) -> FieldResult<String> {
        self.require(key)?.as_string()
    }

    pub fn i64(&self, key: &str) -> FieldResult<Option<i64>> {
        self.get(key)?.map(|v| v.as_i64()).transpose()
    }

    pub fn i32(&self, key: &str) -> FieldResult<Option<i32>> {
        match self.get(key)? {
            Some(v) => {
                let n = v.as_i64()?;
                i32::try_from(n)
                    .map(Some)
                    .map_err(|_| v.err(format!("{n} is out of range for a 32-bit integer")))
            }
            None => Ok(None),
        }
    }

    pub fn bool(&self, key: &str) -> FieldResult<Option<bool>> {
        match self.get(key)? {
            Some(v) => match v.value {
                Value::Bool(b) => Ok(Some(*b)),
                other => Err(v.err(format!("expected true or false, found {}", describe(other)))),
            },
            None => Ok(None),
        }
    }

    /// The elements of the array at `key` (empty when absent).
    pub fn list(&self, key: &str) -> FieldResult<Vec<At<'a>>> {
        match self.get(key)? {
            Some(v) => v.elements(),
            None => Ok(Vec::new()),
        }
    }

    /// The elements of the array at `key`, which must be present.
    pub fn req_list(&self, key: &str) -> FieldResult<Vec<At<'a>>> {
        self.require(key)?.elements()
    }

    /// The elements of this array.
    pub fn elements(&self) -> FieldResult<Vec<At<'a>>> {
        match self.value {
            Value::Array(items) => Ok(items
                .iter()
                .enumerate()
                .map(|(i, value)| At {
                    value,
                    path: format!("{}[{i}]", self.path),
                })
                .collect()),
            other => Err(self.err(format!("expected a list, found {}", describe(other)))),
        }
    }

    /// The entries of the object at `key` (empty when absent), in key order.
    pub fn entries(&self, key: &str) -> FieldResult<Vec<(String, At<'a>)>> {
        match self.obj(key)? {
            Some(obj) => {
                let map = obj.map()?;
                let mut out: Vec<(String, At<'a>)> = map
                    .iter()
                    .filter(|(_, v)| !v.is_null())
                    .map(|(k, value)| {
                        (
                            k.clone(),
                            At {
                                value,
                                path: join(&obj.path, k),
                            },
                        )
                    })
                    .collect();
                // Sorted so results do not depend on serde_json's map ordering feature.
                out.sort_by(|a, b| a.0.cmp(&b.0));
                Ok(out)
            }
            None => Ok(Vec::new()),
        }
    }

    /// A list of strings at `key` (empty when absent).
    pub fn str_list(&self, key: &str) -> FieldResult<Vec<String>> {
        self.list(key)?.iter().map(At::as_string).collect()
    }

    /// A string-to-string map at `key` such as `labels` (empty when absent).
    pub fn string_map(&self, key: &str) -> FieldResult<BTreeMap<String, String>> {
        self.entries(key)?
            .into_iter()
            .map(|(k, v)| Ok((k, v.as_string()?)))
            .collect()
    }

    /// A resource list at `key` such as `requests` or `allocatable` (empty when absent).
    pub fn quantity_map(&self, key: &str) -> FieldResult<BTreeMap<String, Milli>> {
        self.entries(key)?
            .into_iter()
            .map(|(k, v)| Ok((k, v.as_quantity()?)))
            .collect()
    }

    /// An `IntOrString` field (`minAvailable: 1`, `maxUnavailable: "50%"`), as written.
    pub fn int_or_string(&self, key: &str) -> FieldResult<Option<String>> {
        match self.get(key)? {
            Some(v) => match v.value {
                Value::String(s) => Ok(Some(s.clone())),
                Value::Number(_) => Ok(Some(v.as_i64()?.to_string())),
                other => Err(v.err(format!(
                    "expected an integer or a string, found {}",
                    describe(other)
                ))),
            },
            None => Ok(None),
        }
    }
}

/// A short description of a value's type, for error messages.
fn describe(v: &Value) -> String {
    match v {
        Value::Null => "null".to_string(),
        Value::Bool(b) => format!("the boolean {b}"),
        Value::Number(n) => format!("the number {n}"),
        Value::String(s) => format!("the string {s:?}"),
        Value::Array(_) => "a list".to_string(),
        Value::Object(_) => "an object".to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn paths_quote_keys_with_dots() {
        let doc =
            json!({"spec": {"containers": [{"resources": {"requests": {"nvidia.com/gpu": "x"}}}]}});
        let root = At::root(&doc, "");
        let c = root
            .require("spec")
            .unwrap()
            .req_list("containers")
            .unwrap();
        let err = c[0]
            .dig(&["resources"])
            .unwrap()
            .unwrap()
            .quantity_map("requests")
            .unwrap_err();
        assert_eq!(
            err.field,
            "spec.containers[0].resources.requests[\"nvidia.com/gpu\"]"
        );
    }

    #[test]
    fn prefix_is_kept_and_type_errors_are_named() {
        let doc = json!({"spec": {"replicas": "three"}});
        let root = At::root(&doc, "items[2]");
        let err = root.require("spec").unwrap().i64("replicas").unwrap_err();
        assert_eq!(err.field, "items[2].spec.replicas");
        assert_eq!(
            err.reason,
            "expected an integer, found the string \"three\""
        );
        let err = root.require("metadata").unwrap_err();
        assert_eq!(err.field, "items[2].metadata");
    }

    #[test]
    fn scalars_read_as_strings_and_null_is_absent() {
        let doc = json!({"a": 1.5, "b": true, "c": null});
        let root = At::root(&doc, "");
        assert_eq!(root.str("a").unwrap().as_deref(), Some("1.5"));
        assert_eq!(root.str("b").unwrap().as_deref(), Some("true"));
        assert_eq!(root.str("c").unwrap(), None);
        assert!(root.require("c").is_err());
    }
}
