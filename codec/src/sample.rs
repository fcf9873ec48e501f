//! One example frame of every kind and message type (`dtp frame sample`),
//! also used as seeds for the fuzzer and as fixtures in tests.

use bytes::Bytes;
use uuid::Uuid;

use crate::control::{
    AccessMode, AuthOutcome, AuthRequest, AuthResult, Beat, ControlMessage,
    HandoverFailedNotification, HandoverFailedReason, Heartbeat, HeartbeatAck, SessionRelease,
    SessionState, SessionStateChanged, SessionTransferRequest,
};
use crate::error::ErrorCode;
use crate::frame::{
    AckFrame, AeadAlgorithm, Body, CloseFrame, DataFrame, Decision, FrameKind, HandshakeFrame,
    LogicalFrame, Relation, RelationType, RequestFrame, RequestType, ResponseFrame, ResumeFrame,
    Sealed, TAG_LEN, Terms,
};

fn terms(pairs: &[(&str, &str)]) -> Terms {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect()
}

/// Fixed, recognisable ids so samples are reproducible.
const AGREEMENT: Uuid = Uuid::from_u128(0x6f1c_2a4e_8b3d_4c7a_9e21_0d5b_7f3a_1c42);
const DTP_SESSION: Uuid = Uuid::from_u128(0x3b7e_91c0_5a2f_4d18_b6e4_2c9a_0f71_d853);
const TERMINAL_SESSION: Uuid = Uuid::from_u128(0x0193_5e2a_7c41_7b3e_8d2f_64a1_9c0e_b725);
const HANDOVER: Uuid = Uuid::from_u128(0x9a4d_3e7b_1f60_4c2d_a853_7e1b_2d4f_6c90);

/// One frame of every kind, every control message type and every decision.
pub fn samples() -> Vec<LogicalFrame> {
    let control = |m| LogicalFrame::plain(0, Body::Control(m));
    vec![
        LogicalFrame::plain(
            1,
            Body::Request(RequestFrame {
                request_id: 1,
                request_type: RequestType::Collection,
                agreement_id: None,
                terms: terms(&[("max_rate", "1000/s"), ("resource", "camera-0")]),
            }),
        ),
        LogicalFrame::plain(
            1,
            Body::Response(ResponseFrame {
                request_id: 1,
                decision: Decision::Accepted {
                    agreement_id: AGREEMENT,
                },
            }),
        ),
        LogicalFrame::plain(
            1,
            Body::Response(ResponseFrame {
                request_id: 2,
                decision: Decision::CounterProposal {
                    terms: terms(&[("max_rate", "500/s")]),
                },
            }),
        ),
        LogicalFrame::plain(
            1,
            Body::Response(ResponseFrame {
                request_id: 3,
                decision: Decision::Rejected {
                    reason: "resource busy".to_owned(),
                },
            }),
        ),
        LogicalFrame::plain(
            1,
            Body::Request(RequestFrame {
                request_id: 4,
                request_type: RequestType::Adjustment,
                agreement_id: Some(AGREEMENT),
                terms: terms(&[("max_rate", "2000/s")]),
            }),
        ),
        LogicalFrame::plain(
            1,
            Body::Data(DataFrame {
                agreement_id: Some(AGREEMENT),
                fragment_id: 1,
                sequence: 1,
                relations: vec![],
                payload: Bytes::from_static(b"first fragment"),
            }),
        ),
        LogicalFrame::plain(
            1,
            Body::Data(DataFrame {
                agreement_id: None,
                fragment_id: 2,
                sequence: 2,
                relations: vec![
                    Relation {
                        kind: RelationType::DerivedFrom,
                        target: 1,
                    },
                    Relation {
                        kind: RelationType::Annotates,
                        target: 1,
                    },
                ],
                payload: Bytes::from_static(&[0, 1, 2, 3, 0xfe, 0xff]),
            }),
        ),
        LogicalFrame::plain(1, Body::Ack(AckFrame { cumulative: 2 })),
        LogicalFrame::plain(
            0,
            Body::Handshake(HandshakeFrame {
                stage: 1,
                message: Bytes::from_static(&[0x5a; 40]),
            }),
        ),
        LogicalFrame::plain(
            0,
            Body::Resume(ResumeFrame {
                session_id: DTP_SESSION,
                highest_received: 2,
            }),
        ),
        control(ControlMessage::AuthRequest(AuthRequest {
            request_id: 7,
            fay_id: "fay-a".to_owned(),
            resource_id: "camera-0".to_owned(),
            access_mode: AccessMode::Read,
            credential: Bytes::from_static(b"signed-credential-bytes"),
        })),
        control(ControlMessage::AuthResult(AuthResult {
            request_id: 7,
            outcome: AuthOutcome::Granted {
                session_id: TERMINAL_SESSION,
            },
        })),
        control(ControlMessage::AuthResult(AuthResult {
            request_id: 8,
            outcome: AuthOutcome::Refused {
                code: ErrorCode::E_RESOURCE_BUSY,
                message: "camera-0 is held for write".to_owned(),
            },
        })),
        control(ControlMessage::Heartbeat(Heartbeat {
            beats: vec![Beat {
                session_id: TERMINAL_SESSION,
                sequence_number: 0,
            }],
        })),
        control(ControlMessage::HeartbeatAck(HeartbeatAck {
            beats: vec![Beat {
                session_id: TERMINAL_SESSION,
                sequence_number: 0,
            }],
        })),
        control(ControlMessage::SessionRelease(SessionRelease {
            session_id: TERMINAL_SESSION,
        })),
        control(ControlMessage::SessionStateChanged(SessionStateChanged {
            session_id: TERMINAL_SESSION,
            new_state: SessionState::Terminated,
            reason: Some("client_release".to_owned()),
            details: Terms::new(),
        })),
        control(ControlMessage::SessionTransferRequest(
            SessionTransferRequest {
                source_session_id: TERMINAL_SESSION,
                target_fay_id: "fay-b".to_owned(),
                target_credential: Bytes::from_static(b"fay-b-credential"),
                handover_reason: "operator shift change".to_owned(),
                handover_metadata: terms(&[("ticket", "OPS-17")]),
            },
        )),
        control(ControlMessage::HandoverFailedNotification(
            HandoverFailedNotification {
                handover_id: HANDOVER,
                source_session_id: TERMINAL_SESSION,
                target_fay_id: "fay-b".to_owned(),
                reason: HandoverFailedReason::PolicyRejected,
                details: terms(&[("policy", "priority_script")]),
            },
        )),
        LogicalFrame::plain(
            1,
            Body::Close(CloseFrame {
                code: ErrorCode::DAG_CYCLE_DETECTED,
                reason: "fragment 9 closes a cycle".to_owned(),
            }),
        ),
        LogicalFrame::plain(
            1,
            Body::Sealed(Sealed {
                kind: FrameKind::Data,
                aead: AeadAlgorithm::Aes256Gcm,
                key_version: 1,
                seal_counter: 0,
                ciphertext: Bytes::from(vec![0xa5; 24 + TAG_LEN]),
            }),
        ),
    ]
}
