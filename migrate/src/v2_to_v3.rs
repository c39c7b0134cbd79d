//! The v2 → v3 step (spec §5.3, pi's `migrateV2ToV3`).
//!
//! ```js
//! if (entry.type === "session") { entry.version = 3; continue; }
//! if (entry.type === "message" && entry.message && entry.message.role === "hookMessage")
//!     entry.message.role = "custom";
//! ```
//!
//! The entry stays a `message` entry (it is not turned into a `custom_message`), and the role is
//! replaced in place, so key order is unchanged. Elements that are not objects are left as they
//! are, as in pi.

use serde_json::Value;

use crate::v1_to_v2::{is_type, set_version};

/// Applies the step to one element of the entry list.
pub fn migrate_entry(entry: &mut Value) {
    let Value::Object(obj) = entry else { return };
    if is_type(obj, "session") {
        set_version(obj, 3);
        return;
    }
    if !is_type(obj, "message") {
        return;
    }
    if let Some(Value::Object(message)) = obj.get_mut("message")
        && message.get("role").and_then(Value::as_str) == Some("hookMessage")
    {
        message.insert("role".to_owned(), Value::String("custom".to_owned()));
    }
}

/// Runs the step over a whole in-memory entry list (header included).
pub fn migrate_values(values: &mut [Value]) {
    values.iter_mut().for_each(migrate_entry);
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn hook_messages_become_custom_in_place() {
        let mut v = vec![
            json!({"type":"session","version":2,"id":"s"}),
            json!({"type":"message","message":{"role":"hookMessage","customType":"h"},"id":"a"}),
            json!({"type":"message","message":{"role":"user"}}),
            json!({"type":"custom","message":{"role":"hookMessage"}}),
            json!({"type":"message","message":"hookMessage"}),
            json!([1]),
        ];
        migrate_values(&mut v);
        let text: Vec<_> = v.iter().map(pisess_formats::js::to_string).collect();
        assert_eq!(
            text,
            [
                r#"{"type":"session","version":3,"id":"s"}"#,
                r#"{"type":"message","message":{"role":"custom","customType":"h"},"id":"a"}"#,
                r#"{"type":"message","message":{"role":"user"}}"#,
                r#"{"type":"custom","message":{"role":"hookMessage"}}"#,
                r#"{"type":"message","message":"hookMessage"}"#,
                "[1]",
            ]
        );
    }
}
