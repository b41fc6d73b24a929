// Whether this machine has an IPv6 loopback (::1) a test server can listen on; some containers have none.
export const ipv6Loopback = (() => {
  try {
    Bun.serve({ port: 0, hostname: "::1", fetch: () => new Response() }).stop(true);
    return true;
  } catch {
    return false;
  }
})();
