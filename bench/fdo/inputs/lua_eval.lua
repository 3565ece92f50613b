-- EVALUATION workload: binary trees, n-body, OOP with metatables, string.byte/char, varargs
local N = tonumber(arg and arg[1]) or 1
math.randomseed(7)
local function bottomup(d)
  if d == 0 then return {} end
  d = d - 1
  return { bottomup(d), bottomup(d) }
end
local function check(t)
  if t[1] then return 1 + check(t[1]) + check(t[2]) end
  return 1
end
local function nbody(steps)
  local b = {}
  for i = 1, 5 do b[i] = {x = i, y = i * 2, z = i * 3, vx = 0, vy = 0, vz = 0, m = i} end
  for s = 1, steps do
    for i = 1, #b do
      local bi = b[i]
      for j = i + 1, #b do
        local bj = b[j]
        local dx, dy, dz = bi.x - bj.x, bi.y - bj.y, bi.z - bj.z
        local d2 = dx * dx + dy * dy + dz * dz
        local mag = 0.01 / (d2 * math.sqrt(d2))
        bi.vx = bi.vx - dx * bj.m * mag; bj.vx = bj.vx + dx * bi.m * mag
        bi.vy = bi.vy - dy * bj.m * mag; bj.vy = bj.vy + dy * bi.m * mag
        bi.vz = bi.vz - dz * bj.m * mag; bj.vz = bj.vz + dz * bi.m * mag
      end
    end
    for i = 1, #b do local bi = b[i]; bi.x = bi.x + 0.01 * bi.vx; bi.y = bi.y + 0.01 * bi.vy; bi.z = bi.z + 0.01 * bi.vz end
  end
  return b[1].x
end
local Vec = {}
Vec.__index = Vec
Vec.__add = function(a, b) return setmetatable({a[1] + b[1], a[2] + b[2]}, Vec) end
Vec.__eq = function(a, b) return a[1] == b[1] and a[2] == b[2] end
Vec.__tostring = function(a) return "(" .. a[1] .. "," .. a[2] .. ")" end
function Vec.new(x, y) return setmetatable({x, y}, Vec) end
function Vec:len() return math.sqrt(self[1] ^ 2 + self[2] ^ 2) end
local function oop(n)
  local v, l = Vec.new(0, 0), 0
  for i = 1, n do v = v + Vec.new(i % 7, -(i % 5)); l = l + v:len(); if v == Vec.new(0, 0) then l = l + 1 end end
  return l + #tostring(v)
end
local function bytes(n)
  local t = {}
  for i = 1, n do t[i] = string.char(65 + i % 26) end
  local s = table.concat(t)
  local h = 0
  for i = 1, #s do h = (h * 31 + s:byte(i)) % 1000003 end
  local r = s:reverse():sub(10, -10):find("XYZ", 1, true) or 0
  return h + r
end
local function va(...) local s = 0; for i = 1, select("#", ...) do s = s + select(i, ...) end; return s end
local function compile(n)
  -- generated code: table constructors, strings, method calls, closures (parser/code generator)
  local c = 0
  for i = 1, n do
    local src = "local t = {x = " .. i .. ", y = 'v" .. i .. "', [3] = {1, 2, 3}, f = function(self, k) return self.x * k end}; " ..
      "local u = {}; for k, v in pairs(t) do u[#u + 1] = tostring(k) .. type(v) end; table.sort(u); " ..
      "repeat t.x = t.x - 7 until t.x < 0; return #table.concat(u, ';') + t:f(2) + #string.format('%5.2f|%s', t.x, t.y)"
    local f = assert(load(src))
    c = c + f()
  end
  return c
end
local acc = 0
for r = 1, N do
  acc = acc + compile(2500)
  acc = acc + check(bottomup(14))
  acc = acc + nbody(20000)
  acc = acc + oop(60000)
  acc = acc + bytes(100000)
  for i = 1, 20000 do acc = acc + va(i, 2, 3, 4) end
end
print("eval", acc)
