// Start-up baseline: the smallest Bun server, compiled like walletgate; it says where it listens like walletgate does.
const server = Bun.serve({ hostname: "127.0.0.1", port: 0, fetch: () => new Response("ok") });
process.stdout.write(`${JSON.stringify({ msg: "listening", url: `http://127.0.0.1:${server.port}` })}\n`);
