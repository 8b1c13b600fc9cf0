/** esbuild's local-css loader: a `*.module.css` file's class names, each mapped to its scoped name. */
declare module '*.module.css' {
  const classes: Record<string, string>;
  export default classes;
}
