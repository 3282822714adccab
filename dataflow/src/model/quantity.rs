//! Kubernetes resource quantities (`100m`, `1.5Gi`, `2e3`), parsed exactly.
//!
//! Every quantity is held as an integer count of milli-units, so CPU (`250m`), memory (`1Gi`) and
//! counts (`pods: 110`) share one representation and sums stay exact. A value finer than a
//! milli-unit is rounded up, as the API server does when it canonicalises a quantity.

use thiserror::Error;

/// A quantity in milli-units (`1` CPU = 1000, `1Ki` of memory = 1 024 000).
pub type Milli = i64;

#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum QuantityError {
    #[error("empty quantity")]
    Empty,
    #[error("quantity {0:?} is not a number with an optional suffix (e.g. 250m, 1.5Gi, 2e3)")]
    Malformed(String),
    #[error("quantity {0:?} has an unknown suffix {1:?}")]
    UnknownSuffix(String, String),
    #[error("quantity {0:?} is too large")]
    Overflow(String),
}

/// Parses a Kubernetes quantity into milli-units.
pub fn parse_quantity(text: &str) -> Result<Milli, QuantityError> {
    let s = text.trim();
    if s.is_empty() {
        return Err(QuantityError::Empty);
    }
    let (negative, body) = match s.as_bytes()[0] {
        b'-' => (true, &s[1..]),
        b'+' => (false, &s[1..]),
        _ => (false, s),
    };
    let number_end = body
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(body.len());
    let (number, suffix) = body.split_at(number_end);
    if number.is_empty() || number == "." || number.matches('.').count() > 1 {
        return Err(QuantityError::Malformed(text.to_string()));
    }
    let (int_part, frac_part) = number.split_once('.').unwrap_or((number, ""));
    // mantissa = digits as an integer, scaled down by 10^frac_len
    let digits = format!("{int_part}{frac_part}");
    let mantissa: i128 = digits
        .parse()
        .map_err(|_| QuantityError::Overflow(text.to_string()))?;
    let frac_len = frac_part.len() as i32;
    // value = mantissa * 10^(dec_exp) * 2^(bin_exp), then * 1000 for milli-units.
    let (dec_exp, bin_exp): (i32, u32) = match suffix {
        "" => (0, 0),
        "n" => (-9, 0),
        "u" => (-6, 0),
        "m" => (-3, 0),
        "k" => (3, 0),
        "M" => (6, 0),
        "G" => (9, 0),
        "T" => (12, 0),
        "P" => (15, 0),
        "E" => (18, 0),
        "Ki" => (0, 10),
        "Mi" => (0, 20),
        "Gi" => (0, 30),
        "Ti" => (0, 40),
        "Pi" => (0, 50),
        "Ei" => (0, 60),
        other if other.starts_with(['e', 'E']) => {
            let exp: i32 = other[1..]
                .parse()
                .map_err(|_| QuantityError::Malformed(text.to_string()))?;
            if !(-30..=30).contains(&exp) {
                return Err(QuantityError::Overflow(text.to_string()));
            }
            (exp, 0)
        }
        other => {
            return Err(QuantityError::UnknownSuffix(
                text.to_string(),
                other.to_string(),
            ))
        }
    };
    let overflow = || QuantityError::Overflow(text.to_string());
    let mut numerator = mantissa.checked_mul(1000).ok_or_else(overflow)?;
    numerator = numerator
        .checked_mul(1i128 << bin_exp)
        .ok_or_else(overflow)?;
    let exp = dec_exp - frac_len;
    let value = if exp >= 0 {
        numerator
            .checked_mul(10i128.checked_pow(exp as u32).ok_or_else(overflow)?)
            .ok_or_else(overflow)?
    } else {
        let denominator = 10i128.checked_pow((-exp) as u32).ok_or_else(overflow)?;
        // Round up (towards +infinity for the magnitude) as Kubernetes does for sub-milli values.
        // Not `(n + d - 1) / d`: with a long fraction that sum overflows (found by fuzzing).
        numerator / denominator + i128::from(numerator % denominator != 0)
    };
    let value = i64::try_from(value).map_err(|_| overflow())?;
    Ok(if negative { -value } else { value })
}

/// Formats milli-units compactly for people: `250m`, `2`, `1.5Gi` is not attempted (memory is
/// shown in MiB by callers that know it is memory).
pub fn format_milli(value: Milli) -> String {
    if value % 1000 == 0 {
        format!("{}", value / 1000)
    } else {
        format!("{value}m")
    }
}

/// Whole units from milli-units, rounding down.
pub fn whole(value: Milli) -> i64 {
    value.div_euclid(1000)
}

/// Milli-units of `n` mebibytes, saturating (a count from a manifest, e.g. `maxPods`, can be
/// large enough to wrap).
pub const fn mib(n: i64) -> Milli {
    n.saturating_mul(1024 * 1024 * 1000)
}

/// Milli-units of `n` whole units (CPUs, pods, GPUs), saturating as [`mib`].
pub const fn units(n: i64) -> Milli {
    n.saturating_mul(1000)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_forms_kubernetes_accepts() {
        assert_eq!(parse_quantity("250m"), Ok(250));
        assert_eq!(parse_quantity("1"), Ok(1000));
        assert_eq!(parse_quantity("1.5"), Ok(1500));
        assert_eq!(parse_quantity("0.1"), Ok(100));
        assert_eq!(parse_quantity("1Ki"), Ok(1024 * 1000));
        assert_eq!(parse_quantity("1.5Gi"), Ok(1536 * 1024 * 1024 * 1000));
        assert_eq!(parse_quantity("1k"), Ok(1_000_000));
        assert_eq!(parse_quantity("128974848"), Ok(128_974_848_000));
        assert_eq!(parse_quantity("129e6"), Ok(129_000_000_000));
        assert_eq!(parse_quantity("123Mi"), Ok(mib(123)));
        assert_eq!(parse_quantity("1E3"), Ok(1_000_000));
        assert_eq!(parse_quantity("-2"), Ok(-2000));
        assert_eq!(parse_quantity(" 2 "), Ok(2000));
    }

    #[test]
    fn rounds_sub_milli_values_up() {
        assert_eq!(parse_quantity("1n"), Ok(1));
        assert_eq!(parse_quantity("1500u"), Ok(2));
        assert_eq!(parse_quantity("0.0001"), Ok(1));
    }

    #[test]
    fn a_long_fraction_rounds_up_without_overflowing() {
        // The cargo-fuzz `quantities` target's first finding: rounding this up overflowed i128.
        let text = "000.00099533333000000000000000003333333332";
        assert_eq!(parse_quantity(text), Ok(1));
        assert_eq!(parse_quantity(&format!("{text}k")), Ok(996));
    }

    #[test]
    fn rejects_garbage_with_a_reason() {
        assert_eq!(parse_quantity(""), Err(QuantityError::Empty));
        assert!(matches!(
            parse_quantity("abc"),
            Err(QuantityError::Malformed(_))
        ));
        assert!(matches!(
            parse_quantity("1.2.3"),
            Err(QuantityError::Malformed(_))
        ));
        assert!(matches!(
            parse_quantity("5Xi"),
            Err(QuantityError::UnknownSuffix(_, _))
        ));
        assert!(matches!(
            parse_quantity("9Ei"),
            Err(QuantityError::Overflow(_))
        ));
    }
}
