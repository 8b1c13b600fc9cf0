/** This release's version, as in package.json (a test keeps them equal): `stratus --version`, `/_stratus/version`. */
export const VERSION = '0.1.0';
