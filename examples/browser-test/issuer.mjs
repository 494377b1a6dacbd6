// An OAuth-style issuer for the tests, in a few lines of node:crypto: an EC
// P-256 signing key, its JWKS and RFC 8414 metadata served over HTTP, and
// RFC 9068 access tokens (`typ: at+jwt`, ES256) with the claims the gateway
// checks: iss, sub, aud, client_id, iat, exp, jti.
//
// Its token endpoint (POST /token, form-encoded, CORS open) hands a token
// for any subject it is asked for: a stand-in for a real authorization
// server, which would authenticate the client first. Tests only.

import { createServer } from "node:http";
import { generateKeyPairSync, randomUUID, sign } from "node:crypto";
import { readBody } from "../lib/static-server.mjs";

const b64url = (data) => Buffer.from(data).toString("base64url");

export async function startIssuer({ audience = "https://streams.example", kid = `ec-${randomUUID().slice(0, 8)}` } = {}) {
  const { privateKey, publicKey } = generateKeyPairSync("ec", { namedCurve: "P-256" });
  const jwk = { ...publicKey.export({ format: "jwk" }), kid, alg: "ES256", use: "sig" };
  let url;
  let jwksFetches = 0;

  /** A signed access token for `subject`, valid for `ttl` seconds from now. */
  function mint(subject, ttl = 600, { clientId = "example-client" } = {}) {
    const now = Math.floor(Date.now() / 1000);
    const header = { alg: "ES256", typ: "at+jwt", kid };
    const claims = { iss: url, sub: subject, aud: audience, client_id: clientId, iat: now, exp: now + ttl, jti: randomUUID() };
    const input = `${b64url(JSON.stringify(header))}.${b64url(JSON.stringify(claims))}`;
    // JWS ES256 signatures are r||s (IEEE P1363), not DER.
    const signature = sign("sha256", Buffer.from(input), { key: privateKey, dsaEncoding: "ieee-p1363" });
    return { token: `${input}.${signature.toString("base64url")}`, claims };
  }

  const cors = { "access-control-allow-origin": "*", "cache-control": "no-store" };
  const server = createServer(async (req, res) => {
    const path = new URL(req.url, "http://issuer").pathname;
    const json = (status, value) => {
      res.writeHead(status, { ...cors, "content-type": "application/json" });
      res.end(JSON.stringify(value));
    };
    if (req.method === "GET" && path === "/.well-known/oauth-authorization-server") {
      return json(200, { issuer: url, jwks_uri: `${url}/jwks`, token_endpoint: `${url}/token` });
    }
    if (req.method === "GET" && path === "/jwks") {
      jwksFetches++;
      return json(200, { keys: [jwk] });
    }
    if (req.method === "OPTIONS" && path === "/token") {
      res.writeHead(204, { ...cors, "access-control-allow-methods": "POST", "access-control-allow-headers": "content-type" });
      return res.end();
    }
    if (req.method === "POST" && path === "/token") {
      const form = new URLSearchParams((await readBody(req)).toString("utf8"));
      const subject = form.get("subject");
      const ttl = Number(form.get("ttl") ?? 600);
      if (form.get("grant_type") !== "client_credentials" || !subject || !(ttl > 0)) {
        return json(400, { error: "invalid_request" });
      }
      const { token, claims } = mint(subject, ttl, { clientId: form.get("client_id") ?? "example-client" });
      return json(200, { access_token: token, token_type: "Bearer", expires_in: ttl, exp: claims.exp });
    }
    json(404, { error: "not_found" });
  });
  await new Promise((resolve) => server.listen(0, "127.0.0.1", resolve));
  url = `http://127.0.0.1:${server.address().port}`;
  return {
    url,
    audience,
    jwksUrl: `${url}/jwks`,
    mint,
    jwksFetches: () => jwksFetches,
    close: () =>
      new Promise((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
