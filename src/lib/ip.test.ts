import { describe, expect, test } from "bun:test";
import { isPublicAddress, namesPrivateHost, networkKey, normalizeIp, parseTrustProxy, resolveClientIp } from "./ip.ts";

describe("client address", () => {
  test("normalises IPv4-mapped IPv6 and compresses IPv6", () => {
    expect(normalizeIp("::ffff:127.0.0.1")).toBe("127.0.0.1");
    expect(normalizeIp("2001:db8:0:0:0:0:0:1")).toBe("2001:db8::1");
    expect(normalizeIp("not an ip")).toBeNull();
  });

  test("IPv6 addresses of one /64 share a network key, IPv4 stands alone", () => {
    expect(networkKey("2001:db8:1:2:aaaa::1")).toBe(networkKey("2001:db8:1:2:bbbb::9"));
    expect(networkKey("2001:db8:1:3::1")).not.toBe(networkKey("2001:db8:1:2::1"));
    expect(networkKey("10.0.0.1")).not.toBe(networkKey("10.0.0.2"));
  });

  test("without TRUST_PROXY the header is ignored", () => {
    expect(resolveClientIp("127.0.0.1", "1.2.3.4", { kind: "none" })).toBe("127.0.0.1");
  });

  test("hops: take the address that many proxies to the left of the socket", () => {
    const one = parseTrustProxy("1")!;
    expect(resolveClientIp("10.0.0.1", "6.6.6.6, 1.2.3.4", one)).toBe("1.2.3.4");
    const two = parseTrustProxy("2")!;
    expect(resolveClientIp("10.0.0.1", "6.6.6.6, 1.2.3.4, 10.0.0.2", two)).toBe("1.2.3.4");
    // fewer entries than hops: the farthest one there is
    expect(resolveClientIp("10.0.0.1", "1.2.3.4", two)).toBe("1.2.3.4");
  });

  test("CIDRs: walk left past trusted proxies only", () => {
    const trust = parseTrustProxy("10.0.0.0/8, 127.0.0.1")!;
    expect(resolveClientIp("127.0.0.1", "6.6.6.6, 1.2.3.4, 10.1.1.1", trust)).toBe("1.2.3.4");
    // a spoofed left-most entry never wins while an untrusted hop stands to its right
    expect(resolveClientIp("127.0.0.1", "10.9.9.9, 8.8.8.8", trust)).toBe("8.8.8.8");
    // the peer itself is not trusted: header ignored
    expect(resolveClientIp("192.0.2.1", "1.2.3.4", trust)).toBe("192.0.2.1");
    // a trusted proxy a dual-stack hop wrote IPv4-mapped is still that proxy, and walked past
    expect(resolveClientIp("127.0.0.1", "1.1.1.1, ::ffff:10.0.0.5", trust)).toBe("1.1.1.1");
    expect(resolveClientIp("::ffff:127.0.0.1", "1.1.1.1, ::FFFF:10.0.0.5", trust)).toBe("1.1.1.1");
    // and a range written IPv4-mapped trusts the IPv4 addresses it names
    const mapped = parseTrustProxy("::ffff:10.0.0.0/104, ::ffff:127.0.0.1")!;
    expect(resolveClientIp("127.0.0.1", "1.1.1.1, 10.2.3.4", mapped)).toBe("1.1.1.1");
    expect(resolveClientIp("127.0.0.1", "1.1.1.1, 11.2.3.4", mapped)).toBe("11.2.3.4");
  });

  test("bad TRUST_PROXY values are refused", () => {
    expect(parseTrustProxy("10.0.0.0/99")).toBeNull();
    expect(parseTrustProxy("banana")).toBeNull();
    expect(parseTrustProxy("")).toEqual({ kind: "none" });
    // Address shorthands that would trust proxies nobody named, and absurd hop counts.
    for (const value of ["1,2", "1.5", "0177.0.0.1", "0x7f000001", "127.1", "10.0.0.0/8/1", "10.0.0.0/", "fe80::1%eth0", "::1/129", "33", "100000000000000000000000"]) {
      expect([value, parseTrustProxy(value)]).toEqual([value, null]);
    }
    expect(parseTrustProxy("32")).toEqual({ kind: "hops", hops: 32 });
    const written = parseTrustProxy(" 10.0.0.0/8 , ::1, 2001:db8::/32 ")!;
    expect(written.kind === "cidrs" && written.ranges.map(([a, bits]) => `${a.toString()}/${bits}`)).toEqual(["10.0.0.0/8", "::1/128", "2001:db8::/32"]);
  });
});

describe("isPublicAddress", () => {
  test("public unicast passes, including IPv6 forms that carry a public IPv4", () => {
    for (const ip of ["8.8.8.8", "93.184.216.34", "2606:4700:4700::1111", "::ffff:8.8.8.8", "64:ff9b::808:808", "2002:808:808::1"]) {
      expect({ ip, ok: isPublicAddress(ip) }).toEqual({ ip, ok: true });
    }
    for (const ip of ["not-an-ip", "", "2001:db8::1", "64:ff9b:1::a00:1", "64:ff9b:1::808:808", "::7f00:1", "::a00:1", "::808:808", "168.63.129.16", "::ffff:168.63.129.16", "64:ff9b::a83f:8110"]) expect({ ip, ok: isPublicAddress(ip) }).toEqual({ ip, ok: false });
  });
});

describe("namesPrivateHost (a URL's host refused before any DNS)", () => {
  test("address literals that are not public and localhost names, as new URL writes them", () => {
    const host = (url: string) => new URL(url).hostname;
    for (const url of ["http://127.0.0.1/", "http://LOCALHOST./", "http://a.localhost/", "http://[::1]/", "http://[fe80::1]/", "http://[::ffff:10.0.0.1]/", "http://0x7f.1/", "http://2130706433/", "http://169.254.169.254/", "http://168.63.129.16/"]) {
      expect([url, namesPrivateHost(host(url))]).toEqual([url, true]);
    }
    for (const url of ["https://example.com/", "https://93.184.216.34/", "https://[2606:2800:220:1:248:1893:25c8:1946]/", "https://localhost.example.com/"]) {
      expect([url, namesPrivateHost(host(url))]).toEqual([url, false]);
    }
  });
});
