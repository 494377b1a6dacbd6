//! The gateway's `FrontDoor`: the hooks it composes around the shared HTTP
//! surface. `admit` runs the tenant edge (access control, then quotas, then
//! the usage tally) and then the immutable cache, which answers before
//! routing; `answered` keeps marked answers on their way out, with
//! `Stream-Read-Origin` on `HEAD`; the body budget reads request bodies;
//! every part's figures join `/__ursula/gateway/metrics`.

use std::sync::Arc;
use std::sync::atomic::Ordering::Relaxed;

use futures_util::future::BoxFuture;
use http::request::Parts;
use http::{Method, StatusCode};
use ursula_http::error::ApiError;
use ursula_http::front::{Answered, FrontDoor, Holds, LiveDeadline, RequestBody, Upload};
use ursula_http::headers::names;
use ursula_http::render::{self, Answer};
use ursula_http::{BackendError, Metrics, UpstreamFailure};

use crate::auth::{Auth, Decision};
use crate::immutable_cache::ImmutableCache;
use crate::quotas::Quotas;
use crate::uploads::UploadBudget;
use crate::usage::Usage;

/// The tenant edge: access control, quotas and usage, each when its flags
/// are set. Built at start, before the cluster is found.
#[derive(Clone, Default)]
pub struct TenantEdge {
    /// Access control, with `--auth-issuer`.
    pub auth: Option<Arc<Auth>>,
    /// Tenant quotas, with `--quota-policy`.
    pub quotas: Option<Arc<Quotas>>,
    /// The usage log, with `--usage-log`.
    pub usage: Option<Arc<Usage>>,
}

pub struct GatewayFront {
    pub edge: TenantEdge,
    /// `None` with `--immutable-cache-bytes 0`.
    pub cache: Option<ImmutableCache>,
    pub uploads: Arc<UploadBudget>,
}

impl FrontDoor for GatewayFront {
    fn admit<'a>(&'a self, request: &'a mut Parts) -> BoxFuture<'a, Option<Answer>> {
        Box::pin(async move {
            let mut principal = None;
            if let Some(auth) = &self.edge.auth {
                match auth.decide(request).await {
                    Decision::Refuse(e) => return Some(render::error(&e, request.method == Method::HEAD)),
                    Decision::Serve { ends_at, principal: who } => {
                        principal = who;
                        // Voters never see end-user credentials.
                        request.headers.remove(http::header::AUTHORIZATION);
                        if let Some(end) = ends_at {
                            request.extensions.insert(LiveDeadline(end));
                        }
                    }
                }
            }
            let mut holds = Holds::default();
            if let Some(quotas) = &self.edge.quotas
                && let Err(refused) = quotas.admit(request, &mut holds)
            {
                return Some(render::error(&refused, request.method == Method::HEAD));
            }
            if let Some(usage) = &self.edge.usage {
                usage.admit(request, principal, &mut holds);
            }
            if !holds.held.is_empty() {
                request.extensions.insert(holds);
            }
            // After the checks: a cached answer is served only to who may read it.
            self.cache.as_ref().and_then(|c| c.lookup(request))
        })
    }

    fn read_body(
        &self,
        body: RequestBody,
        declared: Option<u64>,
        limit: u64,
    ) -> BoxFuture<'_, Result<Upload, ApiError>> {
        Box::pin(async move { crate::uploads::read_body(&self.uploads, body, declared, limit).await })
    }

    fn answered<'a>(&'a self, request: Answered<'a>, mut answer: Answer) -> BoxFuture<'a, Answer> {
        Box::pin(async move {
            let Some(cache) = &self.cache else { return answer };
            let head = request.method == Method::HEAD;
            if let Some(origin) = cache.read_origin.as_ref().filter(|_| head && answer.status() == StatusCode::OK) {
                answer.headers_mut().insert(names::STREAM_READ_ORIGIN, origin.clone());
            }
            match ImmutableCache::storable(request.method, request.uri) {
                Some(key) => cache.store(key, answer).await,
                None => answer,
            }
        })
    }

    fn metrics(&self, m: &mut Metrics) {
        if let Some(auth) = &self.edge.auth {
            auth.metrics(m);
        }
        if let Some(quotas) = &self.edge.quotas {
            quotas.metrics(m);
        }
        if let Some(usage) = &self.edge.usage {
            m.count("usage_sink_failures", usage.sink_failures.load(Relaxed));
        }
        if let Some(cache) = &self.cache {
            m.count("immutable_cache_hits", cache.hits.load(Relaxed));
            m.count("immutable_cache_misses", cache.misses.load(Relaxed));
            m.count("immutable_cache_bytes", cache.bytes());
        }
        let u = &self.uploads;
        m.count("upload_budget_bytes", u.limits.budget_bytes);
        m.count("upload_reserved_bytes", u.reserved_bytes());
        m.count("upload_refusals_budget", u.refusals_budget.load(Relaxed));
        m.count("upload_refusals_too_slow", u.refusals_too_slow.load(Relaxed));
        m.count("body_bytes_buffered", u.bytes_buffered.load(Relaxed));
        m.count("refusal_drain_bytes", u.refusal_drain_bytes.load(Relaxed));
    }
}

/// The answer of a gateway that has not found its cluster yet: `ready` is
/// `503`, everything else the gateway's own `503 NO_UPSTREAM`, with no
/// server identity (no voter answered).
pub fn before_discovery<T>(req: &http::Request<T>) -> Answer {
    let head = req.method() == Method::HEAD;
    let mut answer = match req.uri().path() {
        "/__ursula/ready" => {
            ursula_http::ops::ready_answer(ursula_http::Readiness::unready("upstreams_unreachable"), None)
        }
        _ => ursula_http::render::error(&ApiError::Backend(BackendError::Upstream(UpstreamFailure::NoUpstream)), head),
    };
    ursula_http::render::add_common_headers(&mut answer, &ursula_http::Cors::Off, None);
    answer
}
