//! What can go wrong while reading manifests, phrased so that a person can find the offending
//! line: every error names the file, the document within it, the object and the field.

use std::path::PathBuf;

/// An error loading manifests. Only the first error is reported: a manifest set with a mistake
/// in it would give a plan that silently ignores part of the cluster, so loading stops instead.
#[derive(Debug, thiserror::Error)]
pub enum ManifestError {
    /// A file or folder could not be read.
    #[error("{}: {source}", path.display())]
    Io {
        /// The file or folder, as given or as found in a folder.
        path: PathBuf,
        /// The underlying I/O error.
        #[source]
        source: std::io::Error,
    },
    /// A document is not valid YAML (or JSON).
    #[error("{file}: document {document}: {reason}")]
    Yaml {
        /// The file as given (or the source name passed to `load_str`).
        file: String,
        /// 1-based position of the document in the file.
        document: usize,
        /// The parser's message, with line and column.
        reason: String,
    },
    /// An object has a missing, mistyped or invalid field.
    #[error("{file}: document {document}: {kind} {object}: {field}: {reason}")]
    Field {
        /// The file as given (or the source name passed to `load_str`).
        file: String,
        /// 1-based position of the document in the file (for a `kind: List`, the list's).
        document: usize,
        /// The object's kind (one of the kinds dovetail reads, hence static).
        kind: &'static str,
        /// `namespace/name` for namespaced kinds, `name` for cluster-scoped ones.
        object: String,
        /// A path into the object, e.g. `spec.containers[0].resources.requests.cpu`.
        field: String,
        /// What is wrong with it.
        reason: String,
    },
}

/// A problem with one field, before the file, document and object it belongs to are known.
/// Parsers return this; the loader adds the context to make a [`ManifestError::Field`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct FieldError {
    pub field: String,
    pub reason: String,
}

impl FieldError {
    pub fn new(field: impl Into<String>, reason: impl Into<String>) -> FieldError {
        FieldError {
            field: field.into(),
            reason: reason.into(),
        }
    }
}

pub(crate) type FieldResult<T> = Result<T, FieldError>;
