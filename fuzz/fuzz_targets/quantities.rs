//! Kubernetes quantities: any text parses to milli-units or is refused, never panics or wraps;
//! what parses prints back to the same value.
#![no_main]

use dovetail_dataflow::model::quantity::{format_milli, parse_quantity};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Ok(milli) = parse_quantity(text) {
        let printed = format_milli(milli);
        assert_eq!(
            parse_quantity(&printed),
            Ok(milli),
            "{text:?} printed as {printed:?}"
        );
    }
});
