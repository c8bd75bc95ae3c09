//! What the demo agent asks for: plausible claim bodies for each tool, numbered so that no two
//! intents of one start (or of two starts) share a key by accident.

use serde_json::{json, Value};

use super::tools::{CREATE_TICKET, DEPLOY, LOOKUP_ORDER, REFUND, SEND_EMAIL};

/// Steps per simulated agent run: every few actions belong to the same `run_id`.
const STEPS_PER_RUN: u64 = 8;

/// Bodies for one start of the demo; `tag` tells this start's keys from earlier ones'.
pub struct Scenario {
    tag: String,
}

impl Scenario {
    /// A scenario whose keys carry `tag`.
    pub fn new(tag: String) -> Self {
        Self { tag }
    }

    /// The claim body of intent number `n` of `tool`. Each tool picks its key a different
    /// way, as real harnesses do: an explicit key, the tool's `key_fields`, a business key,
    /// or one derived from run and step.
    pub fn body(&self, tool: &str, n: u64) -> Value {
        let Self { tag } = self;
        let pick = |options: [&'static str; 3]| options[(n % 3) as usize];
        let run = json!({ "run_id": format!("run-{tag}-{}", n / STEPS_PER_RUN), "step": n % STEPS_PER_RUN });
        let mut body = match tool {
            LOOKUP_ORDER => json!({
                "key": format!("lookup:{tag}-{n}"),
                "args": { "order_id": format!("ord-{}", 1000 + n % 400) },
            }),
            SEND_EMAIL => json!({
                "args": {
                    "message_id": format!("msg-{tag}-{n}"),
                    "to": format!("customer{}@example.com", n % 50),
                    "template": pick(["order_shipped", "refund_issued", "welcome"]),
                    "trace_id": format!("trace-{n}"),
                },
            }),
            REFUND => json!({
                "key": format!("refund:{tag}-{n}"),
                "args": {
                    "order_id": format!("ord-{}", 1000 + n % 400),
                    "amount_cents": 500 + (n * 37) % 4500,
                    "customer": { "email": format!("customer{}@example.com", n % 50) },
                },
            }),
            DEPLOY => json!({
                "business_key": format!("deploy:{tag}-{n}"),
                "args": {
                    "service": pick(["billing-api", "search", "web"]),
                    "version": format!("1.{n}.0"),
                    "environment": "production",
                },
            }),
            _ => json!({
                "tool": CREATE_TICKET,
                "args": {
                    "subject": format!("Customer {} asks about order ord-{}", n % 50, 1000 + n % 400),
                    "priority": pick(["low", "normal", "high"]),
                },
            }),
        };
        merge(&mut body, run);
        body
    }
}

/// The same intent under the same key with other arguments: idem must refuse it (422).
pub fn with_other_args(body: &Value) -> Value {
    let mut other = body.clone();
    if let Some(args) = other["args"].as_object_mut() {
        args.insert("amended".into(), json!(true));
    }
    other
}

fn merge(body: &mut Value, extra: Value) {
    if let (Some(body), Value::Object(extra)) = (body.as_object_mut(), extra) {
        body.extend(extra);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_intent_has_its_own_key_and_the_same_number_gives_the_same_body() {
        let scenario = Scenario::new("t1".into());
        assert_eq!(
            scenario.body(REFUND, 3),
            scenario.body(REFUND, 3),
            "a replay resends the very same body"
        );
        assert_ne!(
            scenario.body(REFUND, 3)["key"],
            scenario.body(REFUND, 4)["key"]
        );
        let other = Scenario::new("t2".into());
        assert_ne!(scenario.body(DEPLOY, 3), other.body(DEPLOY, 3));
        assert_eq!(scenario.body(CREATE_TICKET, 9)["run_id"], "run-t1-1");
        assert_eq!(scenario.body(CREATE_TICKET, 9)["step"], 1);
    }

    #[test]
    fn other_args_keep_the_key() {
        let body = Scenario::new("t".into()).body(SEND_EMAIL, 1);
        let other = with_other_args(&body);
        assert_eq!(other["args"]["message_id"], body["args"]["message_id"]);
        assert_ne!(other["args"], body["args"]);
    }
}
