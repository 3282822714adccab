//! The manifest reader (`dovetail plan -f`): any text is a set of objects or an error, never a
//! panic or a hang.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(text) = std::str::from_utf8(data) {
        let _ = dovetail_ingest::load_str("fuzz.yaml", text);
    }
});
