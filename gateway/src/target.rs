//! What the tenant edge (access control, quotas, usage) reads of a request
//! before the surface routes it: one reading, shared by the three.

use http::request::Parts;

/// A path of the operational routes (`/__ursula/...`), never a bucket's.
pub fn is_operational(path: &str) -> bool {
    path == "/__ursula" || path.starts_with("/__ursula/")
}

/// The path's first segment: the bucket a stream route names (unchecked).
pub fn bucket(path: &str) -> &str {
    path.trim_start_matches('/').split('/').next().unwrap_or_default()
}

/// Whether the request is a live read (`live=sse` or `live=long-poll`).
pub fn is_live_read(request: &Parts) -> bool {
    request.method == http::Method::GET
        && request.uri.query().is_some_and(|q| q.split('&').any(|p| p == "live=sse" || p == "live=long-poll"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_edge_reads_the_bucket_and_the_kind_of_read() {
        assert_eq!(bucket("/tenant-a/s/snapshot/1"), "tenant-a");
        assert_eq!(bucket("/tenant-a"), "tenant-a");
        assert!(is_operational("/__ursula/metrics") && is_operational("/__ursula") && !is_operational("/__ursulax/s"));
        let parts = |uri: &str| http::Request::get(uri).body(()).expect("a request").into_parts().0;
        assert!(is_live_read(&parts("/t/s?offset=-1&live=sse")));
        assert!(is_live_read(&parts("/t/s?live=long-poll")));
        assert!(!is_live_read(&parts("/t/s?offset=-1")));
    }
}
