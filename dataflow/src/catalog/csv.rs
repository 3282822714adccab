//! A minimal reader for the catalogue's CSV files.
//!
//! The embedded files are plain comma-separated text without quoting (no field contains a comma,
//! a quote or a line break; `data/README.md` says how they were made). Rather than guess at
//! quoting rules, a line that contains a `"` is rejected, as is a line with the wrong number of
//! fields. Every failure names the file, the 1-based line and the field.

use super::CatalogError;
use std::collections::HashMap;

/// A parsed CSV file: its header and its rows, still borrowed from the source text.
pub(crate) struct Table<'a> {
    file: &'a str,
    columns: HashMap<&'a str, usize>,
    rows: Vec<(usize, Vec<&'a str>)>,
}

/// One row of a [`Table`], with typed accessors that fail with [`CatalogError::Malformed`].
pub(crate) struct Row<'t, 'a> {
    table: &'t Table<'a>,
    line: usize,
    fields: &'t [&'a str],
}

pub(crate) fn malformed(
    file: &str,
    line: usize,
    field: &str,
    reason: impl Into<String>,
) -> CatalogError {
    CatalogError::Malformed {
        file: file.to_string(),
        line,
        field: field.to_string(),
        reason: reason.into(),
    }
}

impl<'a> Table<'a> {
    /// Splits `text` into rows and checks that the header names every column in `required`.
    /// Blank lines are skipped.
    pub(crate) fn parse(
        file: &'a str,
        text: &'a str,
        required: &[&str],
    ) -> Result<Self, CatalogError> {
        let mut lines = text
            .lines()
            .enumerate()
            .map(|(i, l)| (i + 1, l.strip_suffix('\r').unwrap_or(l)))
            .filter(|(_, l)| !l.trim().is_empty());
        let (header_line, header) = lines
            .next()
            .ok_or_else(|| malformed(file, 1, "", "the file is empty (no header line)"))?;
        let header = split(file, header_line, header)?;
        let mut columns = HashMap::new();
        for (i, name) in header.iter().enumerate() {
            if columns.insert(*name, i).is_some() {
                return Err(malformed(
                    file,
                    header_line,
                    name,
                    "column named twice in the header",
                ));
            }
        }
        if let Some(missing) = required.iter().find(|c| !columns.contains_key(*c)) {
            return Err(malformed(
                file,
                header_line,
                missing,
                "column missing from the header",
            ));
        }
        let mut rows = Vec::new();
        for (line, text) in lines {
            let fields = split(file, line, text)?;
            if fields.len() != header.len() {
                return Err(malformed(
                    file,
                    line,
                    "",
                    format!("{} fields, the header has {}", fields.len(), header.len()),
                ));
            }
            rows.push((line, fields));
        }
        Ok(Table {
            file,
            columns,
            rows,
        })
    }

    pub(crate) fn rows(&self) -> impl Iterator<Item = Row<'_, 'a>> + '_ {
        self.rows.iter().map(move |(line, fields)| Row {
            table: self,
            line: *line,
            fields,
        })
    }
}

fn split<'a>(file: &str, line: usize, text: &'a str) -> Result<Vec<&'a str>, CatalogError> {
    if text.contains('"') {
        return Err(malformed(file, line, "", "quoted fields are not supported"));
    }
    Ok(text.split(',').collect())
}

impl<'a> Row<'_, 'a> {
    #[cfg(test)]
    pub(crate) fn line(&self) -> usize {
        self.line
    }

    /// An error about `field` of this row.
    pub(crate) fn error(&self, field: &str, reason: impl Into<String>) -> CatalogError {
        malformed(self.table.file, self.line, field, reason)
    }

    /// The raw text of a column, which may be empty.
    pub(crate) fn raw(&self, field: &str) -> Result<&'a str, CatalogError> {
        self.table
            .columns
            .get(field)
            .and_then(|&i| self.fields.get(i))
            .map(|s| s.trim())
            .ok_or_else(|| self.error(field, "no such column"))
    }

    /// A column that must not be empty.
    pub(crate) fn text(&self, field: &str) -> Result<&'a str, CatalogError> {
        match self.raw(field)? {
            "" => Err(self.error(field, "empty")),
            s => Ok(s),
        }
    }

    /// A column that may be empty (`None`).
    pub(crate) fn opt_text(&self, field: &str) -> Result<Option<&'a str>, CatalogError> {
        Ok(Some(self.raw(field)?).filter(|s| !s.is_empty()))
    }

    /// A whole number that must be present.
    pub(crate) fn int(&self, field: &str) -> Result<i64, CatalogError> {
        let s = self.text(field)?;
        s.parse()
            .map_err(|_| self.error(field, format!("{s:?} is not a whole number")))
    }

    /// A whole number or nothing.
    pub(crate) fn opt_int(&self, field: &str) -> Result<Option<i64>, CatalogError> {
        match self.opt_text(field)? {
            None => Ok(None),
            Some(_) => self.int(field).map(Some),
        }
    }

    /// A whole number that must not be negative (counts and sizes).
    pub(crate) fn count(&self, field: &str) -> Result<i64, CatalogError> {
        let n = self.int(field)?;
        if n < 0 {
            return Err(self.error(field, format!("{n} is negative")));
        }
        Ok(n)
    }

    /// A finite decimal number that must be present.
    pub(crate) fn number(&self, field: &str) -> Result<f64, CatalogError> {
        let s = self.text(field)?;
        match s.parse::<f64>() {
            Ok(v) if v.is_finite() => Ok(v),
            _ => Err(self.error(field, format!("{s:?} is not a finite number"))),
        }
    }

    /// A finite decimal number or nothing.
    pub(crate) fn opt_number(&self, field: &str) -> Result<Option<f64>, CatalogError> {
        match self.opt_text(field)? {
            None => Ok(None),
            Some(_) => self.number(field).map(Some),
        }
    }

    /// `True` / `False` (as Python writes them) or `true` / `false`.
    pub(crate) fn boolean(&self, field: &str) -> Result<bool, CatalogError> {
        match self.text(field)? {
            "True" | "true" => Ok(true),
            "False" | "false" => Ok(false),
            s => Err(self.error(field, format!("{s:?} is not True or False"))),
        }
    }

    /// A boolean or nothing.
    pub(crate) fn opt_boolean(&self, field: &str) -> Result<Option<bool>, CatalogError> {
        match self.opt_text(field)? {
            None => Ok(None),
            Some(_) => self.boolean(field).map(Some),
        }
    }

    /// One of two words, e.g. `supported` / `unsupported`.
    pub(crate) fn flag(&self, field: &str, yes: &str, no: &str) -> Result<bool, CatalogError> {
        match self.text(field)? {
            s if s == yes => Ok(true),
            s if s == no => Ok(false),
            s => Err(self.error(field, format!("{s:?} is neither {yes:?} nor {no:?}"))),
        }
    }

    /// A `|`-separated list (`on-demand|spot`); empty text is an empty list.
    pub(crate) fn list(&self, field: &str) -> Result<Vec<String>, CatalogError> {
        Ok(self
            .raw(field)?
            .split('|')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(str::to_string)
            .collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_typed_fields_and_names_the_bad_one() {
        let text = "a,b,c\n1,True,x|y\n\n2,maybe,\n";
        let t = Table::parse("t.csv", text, &["a", "b"]).unwrap();
        let rows: Vec<_> = t.rows().collect();
        assert_eq!(rows.len(), 2);
        assert_eq!(rows[0].int("a").unwrap(), 1);
        assert!(rows[0].boolean("b").unwrap());
        assert_eq!(rows[0].list("c").unwrap(), vec!["x", "y"]);
        assert_eq!(rows[1].line(), 4);
        assert_eq!(rows[1].opt_text("c").unwrap(), None);
        match rows[1].boolean("b") {
            Err(CatalogError::Malformed {
                file, line, field, ..
            }) => {
                assert_eq!((file.as_str(), line, field.as_str()), ("t.csv", 4, "b"));
            }
            other => panic!("expected Malformed, got {other:?}"),
        }
    }

    #[test]
    fn rejects_short_rows_quotes_and_missing_columns() {
        assert!(matches!(
            Table::parse("t.csv", "a,b\n1\n", &[]),
            Err(CatalogError::Malformed { line: 2, .. })
        ));
        assert!(matches!(
            Table::parse("t.csv", "a,b\n\"1,2\",3\n", &[]),
            Err(CatalogError::Malformed { line: 2, .. })
        ));
        assert!(matches!(
            Table::parse("t.csv", "a,b\n1,2\n", &["c"]),
            Err(CatalogError::Malformed { line: 1, ref field, .. }) if field == "c"
        ));
        assert!(Table::parse("t.csv", "", &[]).is_err());
    }
}
