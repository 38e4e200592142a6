// @ts-check
import js from '@eslint/js';
import tseslint from 'typescript-eslint';

export default tseslint.config(
  { ignores: ['**/node_modules/**', '**/dist/**', '**/generated/**', '**/coverage/**'] },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    files: ['**/*.ts'],
    languageOptions: {
      parserOptions: { projectService: true, tsconfigRootDir: import.meta.dirname },
    },
    rules: {
      '@typescript-eslint/consistent-type-imports': 'error',
      '@typescript-eslint/no-floating-promises': 'error',
      '@typescript-eslint/no-misused-promises': 'error',
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_' }],
      // A package has one public door: never reach into another package's source.
      'no-restricted-imports': [
        'error',
        { patterns: [{ group: ['@idem/*/*'], message: 'Import the package through its index (@idem/<name>).' }] },
      ],
    },
  },
  {
    // A function a reader can hold in view: a longer one is split into named functions, or says
    // why not where it starts (an eslint-disable comment with its reason).
    files: ['packages/*/src/**/*.ts', 'services/*/src/**/*.ts'],
    ignores: ['**/*.spec.ts'],
    rules: { 'max-lines-per-function': ['error', { max: 60, skipBlankLines: true, skipComments: true }] },
  },
  {
    // A consumer is a thin adapter: it unpacks the message, calls one use case (application/)
    // and turns its answer into an outcome. What changes, and what is enqueued, the use case does.
    files: ['services/*/src/consumers/**/*.ts'],
    ignores: ['**/*.spec.ts'],
    rules: {
      'no-restricted-syntax': [
        'error',
        {
          selector: "MemberExpression[object.name='tx']",
          message: 'A consumer never writes: call a use case in application/ with tx.',
        },
        {
          selector: "ImportDeclaration[source.value='@idem/outbox']",
          message: 'A consumer never enqueues: the use case in application/ does, with its change.',
        },
      ],
    },
  },
  { files: ['**/*.js'], extends: [tseslint.configs.disableTypeChecked] },
);
