// Start-up baseline: the smallest Bun server, compiled like walletgate; it says where it listens like walletgate does.
const server = Bun.serve({ hostname: "127.0.0.1", port: 0, fetch: () => new Response("ok") });
// console.log, not process.stdout.write: the first touch of process.stdout alone costs ~13 ms here.
console.log(JSON.stringify({ msg: "listening", url: `http://127.0.0.1:${server.port}` }));
