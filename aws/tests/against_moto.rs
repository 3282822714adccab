//! The AWS backend against a real EC2/SQS API server (moto's server mode behind the test peer of
//! `support/`): discovery, selector terms, launch, terminate, idempotency, capacity errors,
//! throttling, the interruption queue, capacity reservations and accelerated AMI variants.

mod support;

mod against_moto {
    mod discovery;
    mod launch;
    mod queue;
    mod reservations;
}
