//! The entity method `take-authority` as it travels (docs/federation.md
//! §2.1, §7.2): its arguments, the reason a request states, and the Hello
//! feature that lets a link carry that reason. Pure: values in, values out;
//! what a grant does is `handover.rs`'s.
//!
//! The reason is the third, optional argument. A node sends it only on a
//! link whose two Hellos list [`REASON_FEATURE`]: a peer that does not know
//! it declares the method with two arguments and would refuse a third
//! (400). A call with two arguments, or a reason text this node does not
//! know, counts as `request`, so an older or newer peer never has a call
//! refused for its reason.

use uuid::Uuid;

use crate::federation::authority::handover_types::HandoverReason;
use crate::less::ids::PropertyKey;
use crate::less::value::Value;

/// The Hello feature (docs/peer-link.md §5.2) saying that the sender reads
/// and sends the `reason` argument of `take-authority`.
pub use crate::federation::wire::features::REASON_FEATURE;

/// The longest reason text kept from a call: the known reasons are short
/// words, so a longer one names none of them and only its start is worth
/// logging (LESS itself lets a STRING run to 64 KiB).
pub const MAX_REASON_BYTES: usize = 32;

/// A take-authority call as the authority (or a relay) reads it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(in crate::federation) struct TakeAuthorityCall {
    /// The node asking to become the authority.
    pub requester: Uuid,
    /// The epoch it saw: the call wins only if that is still the current one.
    pub epoch: u64,
    /// Why it asks, as counted where it is granted.
    pub reason: HandoverReason,
    /// A reason text this node does not know, cut to [`MAX_REASON_BYTES`]
    /// (the call counts as `request`); `None` when absent or known.
    pub unknown_reason: Option<String>,
}

/// The reasons a request may state: the others are the authority's own.
fn requested_reason(text: &str) -> Option<HandoverReason> {
    [
        HandoverReason::Request,
        HandoverReason::Zone,
        HandoverReason::Operator,
    ]
    .into_iter()
    .find(|reason| reason.as_str() == text)
}

/// The arguments of the entity `take-authority` method: `requester`
/// (UUID), `epoch` (INTEGER, not negative) and optionally `reason`
/// (STRING). `None` for any other shape: the caller answers 400.
pub(in crate::federation) fn parse_take_authority(
    arguments: &[Value],
) -> Option<TakeAuthorityCall> {
    let (requester, epoch, reason) = match arguments {
        [Value::Uuid(requester), Value::Integer(epoch)] => (requester, epoch, None),
        [Value::Uuid(requester), Value::Integer(epoch), Value::String(reason)] => {
            (requester, epoch, Some(reason.as_str()))
        }
        _ => return None,
    };
    let epoch = u64::try_from(*epoch).ok()?;
    let known = reason
        .map(|text| requested_reason(text).ok_or_else(|| cut(text, MAX_REASON_BYTES).to_owned()));
    let (reason, unknown_reason) = match known {
        None => (HandoverReason::Request, None),
        Some(Ok(reason)) => (reason, None),
        Some(Err(text)) => (HandoverReason::Request, Some(text)),
    };
    Some(TakeAuthorityCall {
        requester: *requester,
        epoch,
        reason,
        unknown_reason,
    })
}

/// The arguments of a take-authority call on a link; `with_reason` when
/// both ends listed [`REASON_FEATURE`].
pub(in crate::federation) fn take_authority_arguments(
    requester: Uuid,
    epoch: u64,
    reason: HandoverReason,
    with_reason: bool,
) -> Vec<Value> {
    // Epochs count hand-overs from 0; one never reaches i64::MAX.
    let epoch = i64::try_from(epoch).unwrap_or(i64::MAX);
    let mut arguments = vec![Value::Uuid(requester), Value::Integer(epoch)];
    if with_reason {
        arguments.push(Value::String(reason.as_str().to_owned()));
    }
    arguments
}

/// The method key of `take-authority`.
pub(in crate::federation) fn take_authority_method() -> PropertyKey {
    PropertyKey::new(
        crate::federation::wire::mapping::entity::COMPONENT,
        crate::federation::wire::mapping::entity::TAKE_AUTHORITY,
    )
}

/// The longest prefix of `text` of at most `limit` bytes that ends on a
/// character boundary.
fn cut(text: &str, limit: usize) -> &str {
    let mut end = text.len().min(limit);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

#[cfg(test)]
mod tests {
    use super::*;

    const NODE: Uuid = Uuid::from_u128(0x1111_2222_3333_4444_5555_6666_7777_8888);

    fn call(reason: Option<Value>) -> Vec<Value> {
        let mut arguments = vec![Value::Uuid(NODE), Value::Integer(4)];
        arguments.extend(reason);
        arguments
    }

    fn text(reason: &str) -> Option<Value> {
        Some(Value::String(reason.to_owned()))
    }

    #[test]
    fn two_arguments_are_a_plain_request() {
        assert_eq!(
            parse_take_authority(&call(None)),
            Some(TakeAuthorityCall {
                requester: NODE,
                epoch: 4,
                reason: HandoverReason::Request,
                unknown_reason: None,
            })
        );
    }

    #[test]
    fn a_third_argument_names_the_reason() {
        for (sent, counted) in [
            ("request", HandoverReason::Request),
            ("zone", HandoverReason::Zone),
            ("operator", HandoverReason::Operator),
        ] {
            let parsed = parse_take_authority(&call(text(sent))).unwrap();
            assert_eq!((parsed.reason, parsed.unknown_reason), (counted, None));
            assert_eq!((parsed.requester, parsed.epoch), (NODE, 4));
        }
    }

    #[test]
    fn an_unknown_reason_counts_as_a_request_and_is_kept_for_the_log() {
        // The authority's own reasons are not a requester's to state.
        for sent in ["departure", "reclaim", "Zone", "", "zone "] {
            let parsed = parse_take_authority(&call(text(sent))).unwrap();
            assert_eq!(parsed.reason, HandoverReason::Request, "{sent:?}");
            assert_eq!(parsed.unknown_reason.as_deref(), Some(sent));
        }
    }

    #[test]
    fn a_long_reason_is_cut_on_a_character_boundary() {
        // 31 ASCII bytes then a two-byte character that would end at 33.
        let long = format!("{}é{}", "z".repeat(31), "x".repeat(70_000));
        let parsed = parse_take_authority(&call(text(&long))).unwrap();
        assert_eq!(parsed.reason, HandoverReason::Request);
        assert_eq!(parsed.unknown_reason, Some("z".repeat(31)));
        let exact = "o".repeat(MAX_REASON_BYTES + 1);
        let parsed = parse_take_authority(&call(text(&exact))).unwrap();
        assert_eq!(
            parsed.unknown_reason.map(|t| t.len()),
            Some(MAX_REASON_BYTES)
        );
    }

    #[test]
    fn wrong_types_and_counts_are_refused() {
        let refused = [
            call(Some(Value::Integer(1))),
            call(Some(Value::Null)),
            call(Some(Value::List(
                crate::less::value_type::ValueType::String,
                vec![Value::String("zone".into())],
            ))),
            vec![Value::Uuid(NODE)],
            vec![],
            vec![Value::String(NODE.to_string()), Value::Integer(4)],
            vec![Value::Uuid(NODE), Value::Integer(-1)],
            vec![Value::Uuid(NODE), Value::String("4".into())],
            {
                let mut four = call(text("zone"));
                four.push(Value::String("more".into()));
                four
            },
        ];
        for arguments in refused {
            assert_eq!(parse_take_authority(&arguments), None, "{arguments:?}");
        }
    }

    #[test]
    fn arguments_carry_the_reason_only_where_the_link_agreed() {
        let with = take_authority_arguments(NODE, 7, HandoverReason::Zone, true);
        assert_eq!(
            with,
            vec![
                Value::Uuid(NODE),
                Value::Integer(7),
                Value::String("zone".into())
            ]
        );
        let without = take_authority_arguments(NODE, 7, HandoverReason::Zone, false);
        assert_eq!(without, vec![Value::Uuid(NODE), Value::Integer(7)]);
        // What is sent is what the authority reads.
        let read = parse_take_authority(&with).unwrap();
        assert_eq!(
            (read.requester, read.epoch, read.reason),
            (NODE, 7, HandoverReason::Zone)
        );
        let read = parse_take_authority(&without).unwrap();
        assert_eq!(read.reason, HandoverReason::Request);
    }
}
