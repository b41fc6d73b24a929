// Lets TypeScript see SQL migration files that Bun embeds as text.
declare module "*.sql" {
  const text: string;
  export default text;
}
