//! Calls to the authority: actions, removals and take-authority requests on
//! entities another node simulates travel to it as method calls, hop by
//! hop, and their answers travel back the same way; only the authority's
//! answer changes state (docs/federation.md §5, §7.2). The order of one
//! entity's calls across route changes is `call_order.rs`'s.

use tracing::{debug, info, warn};

use crate::federation::authority::call_order::{Admission, WaitingCall, MAX_WAITING_CALLS};
use crate::federation::authority::handover_types::{HandoverReason, TAKE_AUTHORITY_ACTION};
use crate::federation::authority::request::{parse_action, AuthorityRequest};
use crate::federation::authority::take_authority::{
    parse_take_authority, take_authority_arguments, take_authority_method, TakeAuthorityCall,
};
use crate::federation::core::{Federation, FederationEvent};
use crate::federation::ids::LinkId;
use crate::federation::routing::link::ForwardedCall;
use crate::federation::wire::mapping::{component, entity};
use crate::less::ids::{Local, ObjectId, PropertyKey, Remote, RequestId};
use crate::less::message::MethodStatus;
use crate::less::value::Value;
use crate::less::value_type::ValueType;
use crate::logging::RemoteText;
use crate::scene::{ChangeSource, Origin, Scene};
use crate::tundra::messages::EntityAction;
use crate::tundra::{ComponentId, EntityId};

impl Federation {
    /// A client removed a remote entity (`component` none) or one of its
    /// components: the request travels to the entity's authority.
    pub fn handle_remote_remove(&mut self, entity: EntityId, component: Option<ComponentId>) {
        let request = match component {
            Some(component) => AuthorityRequest::RemoveComponent(component),
            None => AuthorityRequest::RemoveEntity,
        };
        if !self.forward_request(entity, request, None) {
            debug!(%entity, "removal not forwarded: no route to the authority");
        }
    }

    /// An EntityAction a client sent for the server: when the entity is
    /// remote, it travels to its authority as a method call.
    pub fn handle_action_for_authority(&mut self, action: &EntityAction, scene: &Scene) {
        let remote = scene
            .entity(action.entity_id)
            .is_some_and(|e| e.origin == Origin::Remote);
        if action.name == TAKE_AUTHORITY_ACTION {
            // A client asks for the entity on behalf of this node.
            if let Err(error) =
                self.request_authority(action.entity_id, HandoverReason::Request, scene)
            {
                info!(entity = %action.entity_id, %error, "TakeAuthority not sent");
            }
            return;
        }
        if remote
            && !self.forward_request(
                action.entity_id,
                AuthorityRequest::Action(action.clone()),
                None,
            )
        {
            debug!(entity = %action.entity_id, "action not forwarded: no route to the authority");
        }
    }

    /// An EntityAction a client sent with the Peers bit: it floods to the
    /// clients of every other node.
    pub fn handle_peers_action(&mut self, action: &EntityAction) {
        if let Some(global) = self.tracked.global_of(action.entity_id) {
            self.flood_action(global, action);
        }
    }

    /// Invokes the method that carries `request` on the copy of a remote
    /// entity (or of one of its components) this node presents, toward its
    /// authority. False when there is no route.
    pub(in crate::federation) fn forward_request(
        &mut self,
        entity: EntityId,
        request: AuthorityRequest,
        on_behalf_of: Option<ForwardedCall>,
    ) -> bool {
        let Some(global) = self.tracked.global_of(entity) else {
            return false;
        };
        let Some(tracked) = self.tracked.get(&global) else {
            return false;
        };
        let Some(link_id) = tracked.selected else {
            if tracked.handed_to.is_none() || self.calls.waiting_len(global) >= MAX_WAITING_CALLS {
                return false;
            }
            // Handed over, the new authority's copy not here yet: the call
            // leaves toward it when it arrives (`handover.rs`).
            debug!(entity = %global, "call waits for the new authority's copy");
            self.calls.wait(
                global,
                WaitingCall {
                    entity,
                    request,
                    on_behalf_of,
                },
            );
            return true;
        };
        match self.calls.admit(global, link_id) {
            Admission::Send => {}
            Admission::Wait => {
                debug!(link = link_id.0, entity = %global, "call waits for earlier calls on the old route");
                self.calls.wait(
                    global,
                    WaitingCall {
                        entity,
                        request,
                        on_behalf_of,
                    },
                );
                return true;
            }
            Admission::Refuse => {
                warn!(entity = %global, limit = MAX_WAITING_CALLS, "call refused: too many waiting for a route change");
                return false;
            }
        }
        let Some(tracked) = self.tracked.get(&global) else {
            return false;
        };
        let component_object = match &request {
            AuthorityRequest::RemoveComponent(id) => match tracked.object_of(*id) {
                Some(object) => Some(object),
                None => return false,
            },
            _ => None,
        };
        let Some(link) = self.links.get_mut(&link_id) else {
            return false;
        };
        if matches!(request, AuthorityRequest::TakeAuthority { .. }) && !link.features.entity_v2 {
            // Version 1 of the entity type has no take-authority method
            // (docs/federation.md §2.1): nothing on this route can grant.
            info!(link = link_id.0, entity = %global, "take-authority not sent: the route to the authority carries entity type version 1, without hand-over");
            return false;
        }
        let Some(entity_object) = link.mirror.object_of(global) else {
            return false;
        };
        let (object, method, arguments) = match &request {
            AuthorityRequest::Action(action) => (
                entity_object,
                PropertyKey::new(entity::COMPONENT, entity::ACTION),
                vec![
                    Value::String(action.name.clone()),
                    Value::Integer(i64::from(action.execution_type)),
                    Value::List(
                        ValueType::String,
                        action
                            .parameters
                            .iter()
                            .cloned()
                            .map(Value::String)
                            .collect(),
                    ),
                ],
            ),
            AuthorityRequest::RemoveEntity => (
                entity_object,
                PropertyKey::new(entity::COMPONENT, entity::REMOVE),
                Vec::new(),
            ),
            AuthorityRequest::RemoveComponent(_) => (
                component_object.unwrap_or(entity_object),
                PropertyKey::new(component::OWNER, component::REMOVE),
                Vec::new(),
            ),
            AuthorityRequest::TakeAuthority {
                requester,
                epoch,
                reason,
            } => (
                entity_object,
                take_authority_method(),
                take_authority_arguments(
                    *requester,
                    *epoch,
                    *reason,
                    link.features.take_authority_reason,
                ),
            ),
        };
        let take = matches!(request, AuthorityRequest::TakeAuthority { .. });
        match link.session.invoke_method(object, method, arguments) {
            Ok(call) => {
                link.forwarded_calls.insert(call, (global, on_behalf_of));
                if take && on_behalf_of.is_none() {
                    self.authority_requests.insert((link_id, call));
                }
                debug!(link = link_id.0, entity = %global, request = %RemoteText(format_args!("{request:?}")), "request forwarded to authority");
                self.calls.sent(global, link_id);
                true
            }
            Err(error) => {
                warn!(link = link_id.0, entity = %global, error = %RemoteText(&error), "cannot forward request to authority");
                false
            }
        }
    }

    pub(in crate::federation) fn handle_method(
        &mut self,
        link_id: LinkId,
        call: RequestId<Remote>,
        object: ObjectId<Local>,
        method: PropertyKey,
        arguments: Vec<Value>,
        scene: &mut Scene,
    ) {
        let answer = |federation: &mut Federation, status: MethodStatus, value: Value| {
            if let Some(link) = federation.links.get_mut(&link_id) {
                let sent = link.session.send_method_result(call, status, value);
                federation.stats.session(sent, "method result not sent");
            }
        };
        let Some((entity_id, component_id)) = self.exported_owner(link_id, object) else {
            return answer(
                self,
                MethodStatus::NOT_FOUND,
                Value::String("no such entity".into()),
            );
        };
        let entity_action = PropertyKey::new(entity::COMPONENT, entity::ACTION);
        let entity_remove = PropertyKey::new(entity::COMPONENT, entity::REMOVE);
        let component_remove = PropertyKey::new(component::OWNER, component::REMOVE);
        let request = match component_id {
            None if method == entity_action => match parse_action(entity_id, &arguments) {
                Some(action) => AuthorityRequest::Action(action),
                None => {
                    return answer(
                        self,
                        MethodStatus::BAD_REQUEST,
                        Value::String("bad action arguments".into()),
                    )
                }
            },
            None if method == entity_remove => AuthorityRequest::RemoveEntity,
            None if method == take_authority_method() => match parse_take_authority(&arguments) {
                Some(TakeAuthorityCall {
                    requester,
                    epoch,
                    reason,
                    unknown_reason,
                }) => {
                    if let Some(text) = unknown_reason {
                        debug!(link = link_id.0, entity = %entity_id, reason = %RemoteText(&text), "take-authority reason not known: counted as request");
                    }
                    AuthorityRequest::TakeAuthority {
                        requester,
                        epoch,
                        reason,
                    }
                }
                None => {
                    return answer(
                        self,
                        MethodStatus::BAD_REQUEST,
                        Value::String("bad take-authority arguments".into()),
                    )
                }
            },
            Some(component) if method == component_remove => {
                AuthorityRequest::RemoveComponent(component)
            }
            _ => {
                return answer(
                    self,
                    MethodStatus::NOT_FOUND,
                    Value::String(format!("no method {method}")),
                )
            }
        };
        match scene.entity(entity_id).map(|e| e.origin) {
            Some(Origin::Local) => {
                let global = self.tracked.global_of(entity_id);
                let take = matches!(request, AuthorityRequest::TakeAuthority { .. });
                if let Some(global) =
                    global.filter(|g| !take && self.calls.busy_elsewhere(*g, Some(link_id)))
                {
                    // Taken over while earlier calls are on their way back
                    // from the old authority: this one executes after them.
                    debug!(link = link_id.0, entity = %global, "call waits for earlier calls to the old authority");
                    self.calls.wait(
                        global,
                        WaitingCall {
                            entity: entity_id,
                            request,
                            on_behalf_of: Some(ForwardedCall {
                                from: link_id,
                                request: call,
                            }),
                        },
                    );
                    return;
                }
                let source = ChangeSource::Peer(link_id.0);
                let (status, value) = self.execute_request(source, entity_id, request, scene);
                answer(self, status, value);
            }
            Some(Origin::Remote)
                if matches!(request, AuthorityRequest::TakeAuthority { epoch, .. }
                    if self.handed_epoch(entity_id).is_some_and(|handed| epoch < handed)) =>
            {
                // Handed over at a later epoch than the caller saw: it lost.
                let authority = self.authority_of(entity_id).map(|(a, _)| a);
                *self.stats.handover_refusals.entry("conflict").or_insert(0) += 1;
                answer(
                    self,
                    MethodStatus::CONFLICT,
                    Value::String(authority.map(|a| a.to_string()).unwrap_or_default()),
                );
            }
            Some(Origin::Remote) => {
                let forwarded = self.forward_request(
                    entity_id,
                    request,
                    Some(ForwardedCall {
                        from: link_id,
                        request: call,
                    }),
                );
                if !forwarded {
                    answer(
                        self,
                        MethodStatus::NOT_FOUND,
                        Value::String("no route to the entity's authority".into()),
                    );
                }
            }
            None => answer(
                self,
                MethodStatus::NOT_FOUND,
                Value::String("no such entity".into()),
            ),
        }
    }

    pub(in crate::federation) fn handle_method_result(
        &mut self,
        link_id: LinkId,
        request: RequestId<Local>,
        status: MethodStatus,
        value: Value,
        scene: &mut Scene,
    ) {
        let Some((global, call)) = self
            .links
            .get_mut(&link_id)
            .and_then(|l| l.forwarded_calls.remove(&request))
        else {
            return;
        };
        let released = self.calls.answered(global, link_id);
        if self.authority_requests.remove(&(link_id, request)) {
            let entity = self.tracked.get(&global).map(|t| t.scene());
            if status.is_success() {
                debug!(link = link_id.0, entity = %global, "authority request granted");
            } else if let Some(entity) = entity {
                self.pending_takes.remove(&global);
                *self.stats.requests_refused.entry(status.0).or_insert(0) += 1;
                debug!(link = link_id.0, identity = %global, status = status.0, "authority request answered with a refusal");
                self.events.push_back(FederationEvent::AuthorityRefused {
                    entity,
                    status,
                    detail: value,
                });
                self.release_calls(released, scene);
                return;
            }
            self.release_calls(released, scene);
            return;
        }
        match call {
            Some(ForwardedCall { from, request }) => {
                if let Some(link) = self.links.get_mut(&from) {
                    let sent = link.session.send_method_result(request, status, value);
                    self.stats.session(sent, "authority's answer not passed on");
                }
            }
            None => {
                debug!(
                    link = link_id.0,
                    status = status.0,
                    "action answered by its authority"
                );
                self.events.push_back(FederationEvent::ActionAnswered {
                    status,
                    detail: value,
                });
            }
        }
        self.release_calls(released, scene);
    }

    /// Sends calls that waited for a route change, in order; a call made
    /// on behalf of another link that finds no route is answered so.
    pub(in crate::federation) fn release_calls(
        &mut self,
        calls: Vec<WaitingCall>,
        scene: &mut Scene,
    ) {
        for call in calls {
            let on_behalf_of = call.on_behalf_of;
            if scene.entity(call.entity).map(|e| e.origin) == Some(Origin::Local) {
                // This node took the entity over while the call waited.
                let source =
                    on_behalf_of.map_or(ChangeSource::Node, |c| ChangeSource::Peer(c.from.0));
                let (status, value) =
                    self.execute_request(source, call.entity, call.request, scene);
                if let Some(ForwardedCall { from, request }) = on_behalf_of {
                    if let Some(link) = self.links.get_mut(&from) {
                        let sent = link.session.send_method_result(request, status, value);
                        self.stats
                            .session(sent, "answer of a waiting call not sent");
                    }
                }
                continue;
            }
            if self.forward_request(call.entity, call.request, on_behalf_of) {
                continue;
            }
            if let Some(ForwardedCall { from, request }) = on_behalf_of {
                if let Some(link) = self.links.get_mut(&from) {
                    let sent = link.session.send_method_result(
                        request,
                        MethodStatus::NOT_FOUND,
                        Value::String("no route to the entity's authority".into()),
                    );
                    self.stats.session(sent, "no-route answer not sent");
                }
            }
        }
    }
}

impl Federation {
    /// Executes a request as the entity's authority; the method-result to
    /// answer.
    fn execute_request(
        &mut self,
        source: ChangeSource,
        entity_id: EntityId,
        request: AuthorityRequest,
        scene: &mut Scene,
    ) -> (MethodStatus, Value) {
        match request {
            AuthorityRequest::Action(action) => {
                self.events.push_back(FederationEvent::ActionForAuthority {
                    entity: entity_id,
                    action,
                });
            }
            AuthorityRequest::RemoveEntity => {
                debug!(entity = %entity_id, "entity removed at a peer's request");
                let removed = scene.remove_entity(source, entity_id);
                self.stats
                    .scene(removed, "entity not removed at a peer's request");
            }
            AuthorityRequest::RemoveComponent(component) => {
                debug!(entity = %entity_id, component = %RemoteText(&component), "component removed at a peer's request");
                let removed = scene.remove_component(source, entity_id, component);
                self.stats
                    .scene(removed, "component not removed at a peer's request");
            }
            AuthorityRequest::TakeAuthority {
                requester,
                epoch,
                reason,
            } => {
                return self.answer_take_authority(entity_id, requester, epoch, reason, scene);
            }
        }
        (MethodStatus::SUCCESS, Value::Null)
    }

    /// The epoch at which this node handed `entity` over, while it waits
    /// for the new authority's copy.
    fn handed_epoch(&self, entity: EntityId) -> Option<u64> {
        let tracked = self.tracked.get(&self.tracked.global_of(entity)?)?;
        tracked.handed_to.map(|_| tracked.epoch)
    }
}
