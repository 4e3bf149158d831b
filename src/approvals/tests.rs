use super::*;
use serde_json::json;

fn binding(arguments: &str) -> Binding {
    Binding {
        caller: "alice".into(),
        tool: "refund".into(),
        contract_digest: "sha256:c".into(),
        arguments_digest: arguments.into(),
    }
}

fn request<'a>(arguments: &str, named_id: Option<&'a str>) -> Request<'a> {
    Request {
        binding: binding(arguments),
        shown_arguments: json!({"amount": 1}),
        timeout: Duration::from_secs(60),
        named_id,
        client_gone: None,
    }
}

/// Proves: a decision made while no call waits is collected by the next identical call, once; a
/// call with other arguments does not collect it, and naming its id for them is refused.
#[tokio::test]
async fn a_decision_is_collected_once_by_the_same_call_only() {
    let approvals = Approvals::default();
    let gone = CancellationToken::new();
    gone.cancel();
    let abandoned = approvals
        .wait(Request {
            client_gone: Some(&gone),
            ..request("a", None)
        })
        .await;
    let Verdict::Refused { record, .. } = abandoned else {
        panic!("a call whose client left stops waiting")
    };
    let id = record.id.expect("an id");
    assert_eq!(record.decision, "abandoned");
    assert!(
        approvals
            .decide(&id, "bob", Decision::Approve, None)
            .await
            .is_ok()
    );

    let Verdict::Refused {
        record: refused,
        message,
        ..
    } = approvals.wait(request("b", Some(&id))).await
    else {
        panic!("another call's approval is refused")
    };
    assert_eq!(refused.decision, "refused");
    assert!(message.contains("another call"), "{message}");

    let Verdict::Approved {
        record: approved, ..
    } = approvals.wait(request("a", None)).await
    else {
        panic!("the same call collects the approval")
    };
    assert_eq!(approved.approver.as_deref(), Some("bob"));
    assert!(
        approvals.list().await.expect("listed").is_empty(),
        "used once"
    );
}

/// Proves: nobody decides their own call, an unknown id is reported as such, and a decided
/// approval cannot be decided again.
#[tokio::test]
async fn deciding_is_for_others_and_once() {
    let approvals = Approvals::default();
    let gone = CancellationToken::new();
    gone.cancel();
    let _ = approvals
        .wait(Request {
            client_gone: Some(&gone),
            ..request("a", None)
        })
        .await;
    let listed = approvals.list().await.expect("listed");
    let id = listed[0].id.clone();
    assert_eq!(listed[0].arguments, json!({"amount": 1}));
    assert_eq!(
        approvals
            .decide(&id, "alice", Decision::Approve, None)
            .await
            .err(),
        Some(DecideError::OwnCall("alice".into()))
    );
    assert_eq!(
        approvals
            .decide("nope", "bob", Decision::Approve, None)
            .await
            .err(),
        Some(DecideError::Unknown("nope".into()))
    );
    assert!(
        approvals
            .decide(&id, "bob", Decision::Deny, None)
            .await
            .is_ok()
    );
    assert_eq!(
        approvals
            .decide(&id, "carol", Decision::Approve, None)
            .await
            .err(),
        Some(DecideError::AlreadyDecided(id.clone()))
    );
}

/// Proves: a decision's reason is kept to [`MAX_REASON_CHARS`] characters (it reaches the caller
/// and the receipt), and a blank one is dropped.
#[tokio::test]
async fn reasons_are_bounded() {
    let approvals = Approvals::default();
    let gone = CancellationToken::new();
    gone.cancel();
    for arguments in ["long", "blank"] {
        let _ = approvals
            .wait(Request {
                client_gone: Some(&gone),
                ..request(arguments, None)
            })
            .await;
    }
    let listed = approvals.list().await.expect("listed");
    let reasons = ["é".repeat(MAX_REASON_CHARS + 100), "  ".to_string()];
    for (pending, reason) in listed.iter().zip(reasons) {
        approvals
            .decide(&pending.id, "bob", Decision::Deny, Some(reason))
            .await
            .expect("decided");
    }
    let Verdict::Refused { message, .. } = approvals.wait(request("long", None)).await else {
        panic!("denied")
    };
    assert_eq!(message.matches('é').count(), MAX_REASON_CHARS, "{message}");
    let Verdict::Refused { message, .. } = approvals.wait(request("blank", None)).await else {
        panic!("denied")
    };
    assert!(message.ends_with("was denied by bob"), "{message}");
}
