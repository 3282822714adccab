//! The interruption message parser (EventBridge events as SQS delivers them): any body is a
//! reading or an error, never a panic.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(body) = std::str::from_utf8(data) {
        let _ = dovetail_ingest::parse_message("fuzz.json", 0, body);
    }
});
