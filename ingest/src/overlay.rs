//! `karpenter.sh/v1alpha1` NodeOverlays: extra capacity and price changes for the instance types
//! their requirements select.

use crate::error::FieldResult;
use crate::fields::At;
use crate::meta::meta;
use crate::selectors::requirement_list;
use dovetail_dataflow::model::NodeOverlay;

/// Reads a NodeOverlay. `price` and `priceAdjustment` exclude each other, as Karpenter's CRD says.
pub(crate) fn overlay(root: &At) -> FieldResult<NodeOverlay> {
    let m = meta(root)?;
    let spec = root.req_obj("spec")?;
    let price = match spec.get("price")? {
        Some(p) => {
            let text = p.as_string()?;
            Some(micro_dollars(&text).ok_or_else(|| {
                p.err(format!(
                    "{text:?} is not a price in dollars (e.g. \"0.0432\")"
                ))
            })?)
        }
        None => None,
    };
    let price_adjustment = spec.str("priceAdjustment")?;
    if price.is_some() && price_adjustment.is_some() {
        return Err(spec.err_at(
            "priceAdjustment",
            "price and priceAdjustment cannot both be set",
        ));
    }
    Ok(NodeOverlay {
        name: m.name,
        requirements: requirement_list(&spec, "requirements", false)?,
        capacity: spec.quantity_map("capacity")?,
        price,
        price_adjustment,
        weight: spec.i32("weight")?.unwrap_or(0),
    })
}

/// `"0.0432"` -> 43_200 micro-dollars, exactly (digits past the sixth decimal round half up).
fn micro_dollars(text: &str) -> Option<i64> {
    let text = text.trim();
    let text = text.strip_prefix('$').unwrap_or(text);
    let (int, frac) = text.split_once('.').unwrap_or((text, ""));
    let digits_ok = |s: &str| s.chars().all(|c| c.is_ascii_digit());
    if (int.is_empty() && frac.is_empty()) || !digits_ok(int) || !digits_ok(frac) {
        return None;
    }
    let whole: i64 = if int.is_empty() { 0 } else { int.parse().ok()? };
    let mut micro: i64 = 0;
    for (i, c) in frac.chars().take(6).enumerate() {
        micro += i64::from(c.to_digit(10)?) * 10i64.pow(5 - i as u32);
    }
    if frac
        .chars()
        .nth(6)
        .and_then(|c| c.to_digit(10))
        .is_some_and(|d| d >= 5)
    {
        micro += 1;
    }
    whole.checked_mul(1_000_000)?.checked_add(micro)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prices_are_exact() {
        assert_eq!(micro_dollars("0.0432"), Some(43_200));
        assert_eq!(micro_dollars("1"), Some(1_000_000));
        assert_eq!(micro_dollars("2.5"), Some(2_500_000));
        assert_eq!(micro_dollars(".5"), Some(500_000));
        assert_eq!(micro_dollars("0.0000015"), Some(2));
        assert_eq!(micro_dollars("-1"), None);
        assert_eq!(micro_dollars("1e3"), None);
        assert_eq!(micro_dollars(""), None);
    }
}
