/**
 * Running klbr as a systemd service: `klbr service install | uninstall [--system]` writes or
 * removes the unit that runs `serve` for one state directory (`docs/operations.md`).
 *
 * @module
 */

export {
  type InstallReport,
  installService,
  type ServiceOptions,
  type UninstallReport,
  uninstallService,
  unitFacts,
} from "./_install.ts";
export { renderUnit, type UnitFacts } from "./_unit.ts";
