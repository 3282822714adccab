//! The requirements algebra: two requirements built from fuzzed operators and values (as a
//! manifest writes them); their intersection must admit exactly the values both admit, and an
//! intersection that says it is empty must admit none.
#![no_main]

use dovetail_dataflow::model::{Operator, Requirement};
use libfuzzer_sys::fuzz_target;

const OPERATORS: [Operator; 6] = [
    Operator::In,
    Operator::NotIn,
    Operator::Exists,
    Operator::DoesNotExist,
    Operator::Gt,
    Operator::Lt,
];

/// A requirement from the front of `data`: an operator byte, a count, then values (each a
/// length byte and that many bytes of text).
fn requirement(data: &mut &[u8], probes: &mut Vec<String>) -> Option<Requirement> {
    let (&op, rest) = data.split_first()?;
    let (&count, mut rest) = rest.split_first()?;
    let mut values = Vec::new();
    for _ in 0..count % 4 {
        let (&len, tail) = rest.split_first()?;
        let len = usize::from(len % 24).min(tail.len());
        let value = String::from_utf8_lossy(&tail[..len]).into_owned();
        probes.push(value.clone());
        values.push(value);
        rest = &tail[len..];
    }
    *data = rest;
    let min_values = (op >= 128).then_some(u32::from(count));
    Some(
        Requirement::new(OPERATORS[usize::from(op) % OPERATORS.len()], values)
            .with_min_values(min_values),
    )
}

fuzz_target!(|data: &[u8]| {
    let mut data = data;
    let mut probes: Vec<String> = ["", "0", "-1", "1", "2", "9223372036854775807", "x"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    let (Some(a), Some(b)) = (
        requirement(&mut data, &mut probes),
        requirement(&mut data, &mut probes),
    ) else {
        return;
    };
    // Neighbours of every integer value, where Gt / Lt bounds bite.
    for p in probes.clone() {
        if let Ok(n) = p.parse::<i64>() {
            probes.push(n.saturating_add(1).to_string());
            probes.push(n.saturating_sub(1).to_string());
        }
    }
    let both = a.intersection(&b);
    let flipped = b.intersection(&a);
    for v in &probes {
        assert_eq!(
            both.has(v),
            a.has(v) && b.has(v),
            "{v:?}: {a} ∩ {b} = {both}"
        );
        assert_eq!(both.has(v), flipped.has(v), "{v:?}: not commutative");
        if both.is_empty() {
            assert!(!both.has(v), "{both} says it is empty but admits {v:?}");
        }
    }
});
