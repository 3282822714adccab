//! Notes: things dovetail read but could not use, or assumed, which the user should know about
//! (skipped kinds, unsupported fields, volumes it could not resolve).

/// Notes about one object, each prefixed with the object (`Pod default/web: ...`).
#[derive(Debug, Default)]
pub(crate) struct Notes {
    subject: String,
    list: Vec<String>,
}

impl Notes {
    /// Notes about `subject`, e.g. `Pod default/web`.
    pub fn new(subject: impl Into<String>) -> Notes {
        Notes {
            subject: subject.into(),
            list: Vec::new(),
        }
    }

    pub fn add(&mut self, message: impl AsRef<str>) {
        self.list
            .push(format!("{}: {}", self.subject, message.as_ref()));
    }

    pub fn into_vec(self) -> Vec<String> {
        self.list
    }
}
