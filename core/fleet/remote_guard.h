/* fleet_guard.h: the fleet as a remote view of the engine's guards
 * (remote_guard.c), for the policy that plugs it into a load's rules:
 * rules.remote = { &lr_fleet_remote_ops, an lr_fleet * }. */
#ifndef LUARETRY_FLEET_GUARD_H
#define LUARETRY_FLEET_GUARD_H

#include "engine/engine.h"

extern const lr_remote_ops lr_fleet_remote_ops;

#endif
