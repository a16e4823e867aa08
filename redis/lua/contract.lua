#!lua name=statefs
--[==[
statefs.lua - statefs's Redis Functions library: the server side of a
shared store (statefs -o store=redis://..., docs/shared-store.md).

Authority
---------
With a shared store, Redis decides.  Every transition of the contract is
one function of this library, run by FCALL as one atomic step: it reads
the server's TIME once, makes every check before its first write (Lua has
no rollback, so a refused call writes nothing but its refusal counter and
its outcome record), changes the store, appends one entry per change to
the tenant's log, and returns a typed outcome.  The functions make the
same checks, in the same order, with the same errno, and produce the same
state and the same .events lines as the embedded store's transitions in
store/store.c; each function below names the one it mirrors.  A mount
keeps a copy of what it shows (the mirror: the embedded store's
structures) and changes it only by applying log entries in seq order, so
every number a mirror needs (inode numbers, generations, versions,
deadlines, times, sequence numbers) is decided here and carried in the
entry: a mirror never decides anything.

What stays with the mount: names of special files and depth rules (EPERM,
EEXIST for ".stats"), the root directory's own attributes (each mount's
root is its mounter's: a new tenant's owner is passed in already
inherited from it), staged writes until publication (limits are checked
again here), permissions the kernel checks (default_permissions), the
inotify and .events machinery (fed by the log), and the estimate of the
store's clock (below).

Version
-------
sfs_version returns LIBVERSION.  Bump it when the library changes in a
way a mount can see: a key, a field, an argument, an outcome, a log
entry, a check or its order.  A mount installs its own library when the
loaded one is older (FUNCTION LOAD REPLACE) and refuses to mount when it
is newer; sfs_init records the highest version that ran on the store in
meta libversion and refuses an older mount (ELIBVERSION).  A fix that
changes nothing a mount can see (speed, a comment) needs no bump.

Keys
----
P is the store prefix (-o store_prefix, default "statefs").  Store-wide
keys carry the hash tag {P}; every key of tenant TID carries {P.tTID}, so
a tenant is one slot.  A tenant re-created under the same name is a new
TID: new keys.

  P:{P}:meta          hash: instance (16 hex digits, chosen by the first
                      mount), libversion, ino (the next inode number
                      handed out; starts at 10: root 1, its special files
                      2..9), tid (the last tenant id), seq (root log
                      seq), created_ms, state (ready|draining|drained),
                      drain_deadline, clock_ms (the testclock clock),
                      lim_<name> (every limit in LIMITS), gauges tenants
                      parents children links tombstones bytes, counters
                      admissions removals expiries joins leaves and
                      refused_capacity refused_quota refused_payload
                      refused_draining refused_exists refused_stale
                      refused_conflict refused_gone.
  P:{P}:tenants       hash: tenant name -> TID.
  P:{P}:log           stream: the root log (entries below).
  P:{P}:tombq         sorted set: every tombstone of the store, member
                      "TID/NAME", score its deadline (the pool ages out
                      store-wide, oldest first).
  P:{P}:op:ID         the outcome of root-level operation ID.

  P:{P.tTID}:t        hash: name, tid, ino (the tenant's; its special
                      files are ino+1..ino+8), uid gid mode, atime mtime
                      ctime (ns), seq (the tenant log's seq), state
                      (ready|draining|drained), drain_deadline, gauges
                      parents children links tombstones bytes.
  P:{P.tTID}:parents  hash: parent name -> parent ino (PINO).
  P:{P.tTID}:p:PINO   hash: name gen uid gid mode atime mtime ctime ttl
                      deadline child_ttl links (entries in the bucket).
  P:{P.tTID}:l:PINO   hash: the bucket: child name -> state ino (SINO).
  P:{P.tTID}:s:SINO   hash: data (the content) version nlink uid gid mode
                      atime mtime ctime ttl deadline links (its links,
                      "PINO/NAME" separated by one space, newest first:
                      the order the embedded store lists them in).
  P:{P.tTID}:tombs    hash: parent name -> "GEN DEADLINE".
  P:{P.tTID}:due      sorted set: leases, member "p:PINO" or "s:SINO",
                      score the deadline.
  P:{P.tTID}:log      stream: the tenant's log (entries below).
  P:{P.tTID}:op:ID    the outcome of operation ID on this tenant.

Names never contain white space or '/', so "PINO/NAME" and lists
separated by spaces are unambiguous.  A removed tenant's keys are deleted
at once but its log, which ends with the removal, expires LOG_KEEP_MS
later, and op records expire OP_KEEP_MS after they were made.

Numbers and time
----------------
Durations (ttls, tombstone_ttl_ms, default_ttl_ms, drain_window_ms, a
clock advance) are at most 10^12 ms (STORE_DURATION_MAX_MS), else
EINVAL, as in the embedded store.
Every number is a whole decimal below 10^15 (ttls, sizes, inode numbers:
Lua's numbers are doubles, exact below 2^53, and every sum made here stays
below it); a larger one is EINVAL.  Times of nodes (atime mtime ctime)
are ns since the epoch, kept as decimal strings, never added to.

The store's clock is the server's TIME in ms (now_ms).  With testclock
(lim_testclock 1) it is meta clock_ms alone: a manual clock that starts
at 0 and moves only by sfs_clock_advance, as the embedded store's
-o testclock clock does, so that a test of "ttl - 1 ms: alive, 1 ms more:
gone" is exact whatever the real time does.  Every deadline is on it: a lease's (now + ttl), a tombstone's (now +
tombstone_ttl_ms), a drain's (now + drain_window_ms).  A node whose
deadline is <= now is gone for every function, reaped or not, as in the
embedded store.  Node times are TIME itself (wall time), as the embedded
store stamps them with CLOCK_REALTIME.  A mount estimates now_ms from the
now_ms of every reply (it never goes backwards) and hides what is past
its deadline by that estimate.

Calling convention
------------------
  FCALL sfs_<op> NUMKEYS KEY... INSTANCE OPID DEADLINE_MS ARG...

KEYS[1] is always P:{P}:meta.  KEYS[2], when the function is about a
tenant, is that tenant's P:{P.tTID}:t (the mount knows TID from its
mirror; a TID that is gone, or was never, is a dead tenant: ESTALE).  A
function about two tenants (link, rename) takes the second as KEYS[3].
Functions whose scope is the store or one tenant (drain, drain_now,
expire, stats, dump) take 1 key for the store, 2 for a tenant.  Other
keys of a tenant are derived from its key; root-level functions
(mkdir_tenant, rmdir_tenant, drain of the store, expire's tombstone
ageing) also touch tenant keys they find in P:{P}:tenants or tombq, which
works on one Redis, not across Redis Cluster slots.

  INSTANCE     the store instance the mount believes in (meta instance).
               A different one, or none (the store was flushed), is
               outcome ESTALEINST: the mount reloads everything.
  OPID         "" or an id unique per mutation, "MOUNT:N": the mount's id
               (no ':') and a counter.  Every entry the call appends
               names MOUNT (field by), so a mount tells its own changes
               from the others'.  The
               first run records its outcome under op:OPID for
               OP_KEEP_MS; a run that finds the record returns it and
               does nothing else, so a retry after a lost reply applies
               the operation at most once.  Read-only functions ignore it.
  DEADLINE_MS  "" or "0" (none), or the server's real time (TIME, in ms
               since the epoch, whatever the store's clock: under
               testclock too) after which the mutation must not happen:
               the mount's lower bound of TIME now, plus store_timeout.
               Past it: ETIMEDOUT [real ms], nothing done, nothing
               recorded (no later run of the same operation can be
               earlier, unless TIME steps back: the fence below is what
               does not depend on clocks).

  sfs_fence NUMKEYS KEY... INSTANCE OPID
      The end of a mutation whose reply the mount did not get in time
      (the same keys as the call: its op record lives where the call's
      does).  When op:OPID holds the call's outcome, returns it: the
      call ran, and this is what it did.  Else records ETIMEDOUT [real
      ms] as the outcome of OPID and returns it: the call has not run,
      and now never will (a run that finds the record returns it and
      does nothing else).  Either way the mount reports the truth.  An
      instance that changed is ESTALEINST (the call, if it runs, meets
      the same).  Writes nothing else; not logged.

Then the function's arguments.  Modes are decimal (420 = 0644).  A
credential is three arguments UID GID GROUPS (GROUPS: supplementary gids
separated by commas, may be empty); UID "" means no credential (the
embedded store's NULL cred: no check).  An owner is UID GID MODE (the
mode with the umask applied; only its low 12 bits are kept).  Booleans
are "1" or anything else.

Outcomes
--------
An array: { CODE, now_ms, seq, results... }.  CODE is "OK" or an errno
name: ENOENT EEXIST ESTALE EAGAIN ENOSPC EDQUOT EFBIG EINVAL ENAMETOOLONG
EROFS EXDEV EACCES EISDIR EPERM, plus ETIMEDOUT (deadline passed),
EDAMAGED (results: KEY, a key of the store that is not as statefs made
it; nothing was written, not even a counter: "Damage" below),
ESTALEINST (instance mismatch; results: the store's instance or ""),
ELIMITS and ELIBVERSION (sfs_init).  now_ms is the store's clock at the
call.  seq is the tenant log's seq after the call (the root log's for a
root-level function): the mount waits until its mirror has applied it
before it answers the syscall (read-your-writes), refusals included, so
an EEXIST is never followed by an ENOENT from a stale mirror.  A
refusal that the embedded store counts (its refuse(): ENOSPC EDQUOT EFBIG
EROFS EEXIST ESTALE EAGAIN ENOENT, on the paths where store.c counts
them) bumps the matching refused_* counter; the others (EINVAL EXDEV
EACCES EISDIR, a cleanup of an unknown tenant, a setattr or child_ttl
through a dead node, a drain of a dead tenant) do not, as in store.c.

Log entries
-----------
XADD P:{P.tTID}:log MAXLEN ~ lim_log_max * FIELD VALUE..., in the order
the changes happened; a function appends one entry per change (a create
that reaps an expired child at its name appends the expire, then the
create).  Every entry has:

  seq     its first sequence number in the tenant (1, 2, ...; never reused)
  nseq    present when the entry stands for more than one .events line:
          its lines are numbered seq .. seq+nseq-1, in the order given
          below.  An entry with no .events line still takes one seq (a
          .events reader sees the gap).
  op      what changed (below)
  ms      the store's clock when it changed
  by      the mount whose call made the change (OPID's MOUNT); "" for
          a call with no OPID (a reaper's sfs_expire).
  ns      wall time in ns: the atime/mtime/ctime stamped on every node
          the change makes or touches (a join stamps the new parent and
          the tenant's mtime/ctime; a create, link or unlink the
          parent's mtime/ctime; a rename both parents'; a removal the
          states that lose a link but live on, ctime).

and, per op (.events line: SEQ OP TENANT PARENT CHILD GENERATION VERSION,
"-" for a field that does not apply):

  join  kind=tenant name tid ino uid gid mode
        A tenant is made (the first entry of its log).  Line: join T - - - -.
  join  kind=parent name ino gen uid gid mode
        Parent NAME joins with inode INO, generation GEN; a tombstone of
        NAME, if the tenant has one, is removed.  Line: join T NAME - GEN -.
  leave name gen tomb ino
        Parent NAME (inode INO) leaves: every link of its bucket goes (a
        state whose last link it was ends), the parent goes, and a
        tombstone NAME with generation GEN and deadline TOMB is filed.
        Line: leave T NAME - GEN -.
  depart name gen tomb [ino] [refresh=1]
        As leave when INO is given (a live parent); without INO only the
        tombstone is filed (GEN 0: the name never joined).  With
        refresh=1 the tombstone NAME exists and only its deadline becomes
        TOMB.  Line: depart T NAME - GEN -.
  expire kind=parent name ino gen tomb
        Parent NAME passed its deadline: as leave.  Line: expire T NAME - GEN -.
  expire kind=child ino ver lines
        State INO passed its deadline: every link goes, the state ends.
        LINES lists its links "PARENT/CHILD", newest first; one line each:
        expire T PARENT CHILD GEN(PARENT) VER.
  create parent pino child ino gen uid gid mode ttl deadline
        State INO (version 0, empty, nlink 1, lease TTL/DEADLINE, 0 for
        none) is linked as CHILD in parent PINO.  Line: create T PARENT CHILD GEN 0.
  unlink parent pino child ino gen ver
        The link CHILD of PINO goes; state INO ends when it was its last.
        Line: unlink T PARENT CHILD GEN VER.
  link  parent pino child ino gen ver
        State INO gains the link CHILD in PINO (nlink + 1; the state's
        ctime).  Line: link T PARENT CHILD GEN VER FP FC, FP/FC the
        state's newest link before this one (the mirror names it).
  rename parent pino child to_parent to_pino to_child ino gen ver
         [replaced=INO2 replaced_ver=VER2]
        The link CHILD of PINO, to state INO, moves to TO_CHILD in
        TO_PINO (GEN is TO_PARENT's; INO's ctime).  With replaced,
        TO_CHILD held state INO2, which loses that link (and ends when
        it was its last): two lines, unlink T TO_PARENT TO_CHILD GEN
        VER2, then the rename line.
        Line: rename T TO_PARENT TO_CHILD GEN VER PARENT CHILD.
  exchange parent pino child to_parent to_pino to_child ino ino2 gen ver
        The two entries trade states: INO, at CHILD, goes to TO_CHILD;
        INO2, at TO_CHILD, to CHILD (no ctime; both parents' mtime and
        ctime).  VER is INO's.
        Line: exchange T TO_PARENT TO_CHILD GEN VER PARENT CHILD.
  write ino ver data lines [mtime] [kind=child mode uid gid atime mtime
        ctime deadline]
        State INO's content becomes DATA (whole), version VER, mtime and
        ctime NS (mtime MTIME when given: an mtime kept by sfs_publish).
        LINES: its links "PARENT/CHILD", newest first, one line each:
        write T PARENT CHILD GEN(PARENT) VER.  From sfs_setattr (a size
        change) it also carries what that call set, as attr does.
  attr  kind ino [mode] [uid] [gid] [atime] [mtime] [ctime] [deadline]
        Node INO of KIND (tenant, parent, child) takes the attributes
        given; DEADLINE: its lease was renewed (a touch).  No line.
  ttl   kind ino ttl deadline
        Node INO's lease becomes TTL, its deadline DEADLINE (0, 0: none).  No line.
  renew kind ino ttl deadline
        Node INO's deadline becomes DEADLINE.  No line.
  child_ttl ino ttl
        Parent INO's children start with lease TTL (0: default_ttl).  No line.
  tomb_age name
        Tombstone NAME aged out.  No line.
  drain deadline
        The tenant's drain starts, ending at DEADLINE.  Line: drain T - - - -.
  drain clear=1 parents [dead=1]
        The tenant's drain scope is cleared: every parent in PARENTS
        (names in join order) leaves as by leave but files no tombstone,
        every tombstone goes, the tenant is drained.  One line per
        parent: drain T PARENT - GEN -; with dead=1 (a drain of the whole
        store) the tenant goes too, and one more line: cleanup T - - - -
        (drain T - - - - is only ever a tenant's drain starting).
  cleanup name tid
        The tenant and everything in it go.  Line: cleanup T - - - -.

The root log's entries (seq is the root seq; no .events line but drain):

  tenant  name tid ino       a tenant was made: follow its log
  cleanup name tid           a tenant was cleaned up
  drain   deadline           the store's drain starts.  Line: drain - - - - -
  drained tenants            the store's drain cleared it: every tenant
                             went (their logs say how), state drained
  clock   clock_ms           testclock: the store's clock moved to CLOCK_MS

A mount follows the root log and each tenant's log with XREAD; one whose
position fell off a log (trimmed) reloads from sfs_dump.

Functions
---------
Mutations (each mirrors the named store.c function, checks in this
order; "(counted)" marks refusals that bump refused_*):

  sfs_init 1 META - - - LIBVERSION CANDIDATE ADOPT [NAME VALUE]...
      First mount (meta has no instance): records instance CANDIDATE (16
      hex digits), LIBVERSION of the library, the limits given (a limit
      not given takes its default) and zero gauges.  Later mounts:
      ELIBVERSION [library version] when the mount is older than the
      library; unless ADOPT is "1", each limit given (or its default)
      must equal the recorded one, in LIMITS order, else ELIMITS [name,
      recorded, given]; EINVAL [name] for an unknown limit or a bad
      value.  OK [instance, created 1|0, then NAME VALUE of every
      recorded limit].  Ignores INSTANCE and OPID.
  sfs_mkdir_tenant 1 META ... NAME UID GID MODE     (tenant_create)
      name rule (EINVAL, ENAMETOOLONG); draining EROFS (counted); exists
      EEXIST (counted); max_tenants ENOSPC (counted).  OK [tid, ino, root seq].
  sfs_rmdir_tenant 1 META ... NAME CRED             (tenant_cleanup)
      unknown ENOENT; the cascade rule of store_rmdir for CRED EACCES.
      OK [root seq].
  sfs_join 2 META T ... NAME UID GID MODE           (parent_join)
      name rule; dead tenant ESTALE (counted); an expired parent NAME is
      reaped; draining EROFS, live NAME EEXIST, max_parents ENOSPC, the
      tenant's share tenant_max_parents EDQUOT (all counted).  The generation is the tombstone's + 1 (a due tombstone
      ages out first) or 1; a setgid tenant gives its gid and the setgid
      bit.  OK [ino, gen].
  sfs_leave 2 META T ... NAME CRED                  (parent_leave, rmdir)
  sfs_depart 2 META T ... NAME CRED                 (parent_leave, .depart)
      depart only: name rule.  Dead tenant ESTALE (counted); an expired
      parent NAME is reaped, a due tombstone NAME ages out; leave: no
      parent ENOENT (counted); depart: no parent but a tombstone: the
      tombstone's age starts over, OK.  A full pool (max_tombstones,
      ENOSPC) or tenant's share of it (tenant_max_tombstones, EDQUOT):
      due tombstones age out store-wide, once; still full, that errno
      (counted).  CRED may not empty the parent by hand EACCES.  OK [gen].
  sfs_create 2 META T ... PINO NAME UID GID MODE EXCL   (do_create)
      name rule.  Unless the parent is gone, an expired child NAME is
      reaped; a live child NAME: EEXIST (counted) with EXCL, else OK
      [its ino, 0] and nothing changes.  Admission: draining EROFS, gone
      parent ESTALE, max_children ENOSPC, parent_quota or tenant_quota
      EDQUOT, tenant_max_children EDQUOT (all counted).  Lease: the parent's child_ttl, else
      default_ttl.  A setgid parent gives its gid.  OK [ino, 1].
  sfs_unlink 2 META T ... PINO NAME                 (do_unlink)
      gone parent ESTALE, no live child NAME ENOENT (both counted; an
      expired one is reaped).  OK.
  sfs_link 3 META T CT ... SINO PINO NAME           (do_link)
      T is PINO's tenant, CT the state's.  Name rule; gone state or
      parent ESTALE (counted); CT is not T EXDEV; an expired child NAME
      is reaped; live NAME EEXIST; admission (draining EROFS, ESTALE,
      quotas EDQUOT; no max_children); the state gone by now ESTALE (all
      counted).  OK.
  sfs_rename 3 META T BT ... PINO NAME TO_PINO TO_NAME FLAGS   (do_rename)
      FLAGS: 1 noreplace, 2 exchange.  Name rule for TO_NAME; gone
      parent ESTALE (counted); BT is not T EXDEV; both flags EINVAL;
      expired children at either name are reaped; no source ENOENT,
      exchange without a destination ENOENT, noreplace with one EEXIST
      (counted); a destination that is a link to the source's state: OK,
      nothing happens (not under exchange); draining EROFS (counted); a
      move to another parent over its parent_quota EDQUOT (counted).  OK.
  sfs_publish 2 META T ... SINO MODE BASE DATA [SEEN_VERSION SEEN_MTIME]
                                                     (do_stage_publish)
      MODE replace|append|cas; BASE the version a cas stage opened on;
      SEEN_*: the state's version and mtime when the stage last wrote.
      Gone state ESTALE, cas with another version EAGAIN, over
      max_payload EFBIG, growth over max_bytes ENOSPC, over the
      tenant's share tenant_max_bytes EDQUOT (all counted).  The
      state's mtime survives when it changed since SEEN_MTIME with the
      version still SEEN_VERSION (set before close: cp -p).  OK [version].
  sfs_setattr 2 META T ... KIND INO MODE UID GID ATIME MTIME SIZE [KILL RENEW]
                                                     (do_setattr)
      Each of MODE..KILL "" when not set.  KILL: 1 clears set-user-ID, 2
      set-group-ID, from the mode as it is (after MODE); RENEW "1": the
      lease of a parent or child is renewed too (touch).  Gone node
      ESTALE, SIZE of a directory EISDIR (neither counted); RENEW of a
      node with a lease while draining EROFS; SIZE over max_payload
      EFBIG, growth over max_bytes ENOSPC, over tenant_max_bytes EDQUOT
      (counted).  A size change is a publication (truncate or
      zero-extend, version + 1).  OK.
  sfs_set_ttl 2 META T ... KIND INO TTL             (do_lease, set)
  sfs_renew 2 META T ... KIND INO                   (do_lease, renew)
      KIND parent|child.  TTL over 10^12 ms EINVAL; gone ESTALE
      (counted); renew of a node without a lease: OK, nothing changes;
      draining EROFS (counted), a ttl of 0 included.  OK [deadline].
  sfs_set_child_ttl 2 META T ... PINO TTL           (store_set_child_ttl)
      TTL over 10^12 ms EINVAL; gone parent ESTALE (not counted; no
      drain check).  OK.
  sfs_expire 1|2 META [T] ... BUDGET                (store_expire)
      Due leases of T, oldest first, at most BUDGET (a child as by unlink,
      a parent as by rmdir with its tombstone even over max_tombstones;
      the states it ends are removals); then due tombstones store-wide,
      at most BUDGET; then, with T, a due drain of T, without T, a due
      drain of the store (due: the deadline passed or no child is left),
      so a mount that calls each tenant's then the store's ends due
      leases before a drain of the store clears the rest.  Idempotent.
      OK [leases expired, tombstones aged].
  sfs_drain 1|2 META [T] ... [CRED]                 (store_drain_as)
  sfs_drain_now 1|2 META [T] ...                    (store_drain_now)
      Dead tenant ESTALE (not counted).  A tenant's drain with CRED
      starts only when CRED could empty the tenant by hand (the rule of
      sfs_rmdir_tenant), else EACCES (not counted); a running one is not
      judged again.  Starts the drain unless one
      runs (a second call does not move its deadline).  sfs_drain clears
      the scope at once when it is due already; sfs_drain_now expires
      due leases first, then clears the scope now.  OK [state].
  sfs_clock_advance 1 META ... MS
      testclock only (else EPERM): the clock moves MS forward (MS over
      10^12, or a clock past 8 * 10^12, EINVAL).  OK
      [clock_ms].  The mount then runs sfs_expire where things are due.

Read-only (flag no-writes, FCALL_RO; INSTANCE checked, OPID and
DEADLINE_MS ignored):

  sfs_version 0                 LIBVERSION (an integer, not an outcome)
  sfs_dump 1 META ...           OK now seq LASTID META(k v...) TENANTS(name tid...)
  sfs_dump 2 META T ...         OK now seq LASTID T(k v...)
                                PARENTS({pino, P(k v...), BUCKET(name sino...)}...)
                                STATES({sino, S(k v...)}...) TOMBS(name "GEN DEADLINE"...)
      One consistent instant of the store's root or of one tenant, with
      its log's seq and last entry id: where a mount starts following.
      A dead tenant: ESTALE.
  sfs_stats 1|2 META [T] ...    OK now seq then KEY VALUE: instance state
                                drain_ms_left uptime_ms [tenant] tenants
                                parents children links tombstones bytes,
                                every limit, the counters (store-wide).
      The gauges are the store's or the tenant's; state is the scope's
      (the further of the tenant's drain and the store's).  Tombstones
      past their deadline count until sfs_expire ages them out.
  sfs_sync N META T... ...      OK now ROOTSEQ TSEQ... (-1: tenant gone):
                                what a mount's mirror must have applied
                                to be as fresh as the store (fsync of a
                                directory).

Rules that change with the embedded store
-----------------------------------------
Kept in one place each, so that they follow store.c easily: name_check()
(which names are valid at which depth), LIMITS (every limit, its default
and the order mounts compare them in), admit() (the admission checks:
per-tenant shares of a ceiling belong there), REFUSED (which errno counts
as which refusal), the entry fields named above (what .events shows).
]==]

local LIBVERSION = 4

-- Numbers, tables and the rules most likely to change ------------------------

local NSPECIAL = 8                -- STORE_NSPECIAL: inode slots of a directory's special files
local FIRST_INO = 2 + NSPECIAL    -- root = 1, the root's specials 2..9
local OP_KEEP_MS = 120000         -- how long an operation's outcome is kept for a retry
local LOG_KEEP_MS = 600000        -- how long a removed tenant's log stays for its followers
local DURATION_MAX_MS = 1000000000000 -- STORE_DURATION_MAX_MS: a ttl, a window, an advance
local CLOCK_MAX_MS = 8 * DURATION_MAX_MS -- STORE_CLOCK_MAX_MS: the testclock's ceiling
local S_ISGID, S_ISVTX = 1024, 512
local MAY_W, MAY_X = 2, 1

-- The store's limits, recorded in meta as lim_<name> by the first mount
-- (sfs_init) and compared, in this order, with every later mount's.  The
-- defaults are store_limits_default()'s.  A new limit is one line here
-- plus its check where the store makes it (admit() for admissions).
local LIMITS = {
	{ 'max_tenants', 1024 },
	{ 'max_parents', 65536 },
	{ 'max_children', 1048576 },
	{ 'max_bytes', 1073741824 },
	{ 'max_payload', 65536 },
	{ 'max_name', 255 },
	{ 'max_tombstones', 65536 },
	{ 'tombstone_ttl_ms', 600000 },
	{ 'parent_quota', 0 },
	{ 'tenant_quota', 0 },
	-- A tenant's shares of the store-wide ceilings (EDQUOT; 0: none).
	-- The defaults are STORE_SHARE_AUTO as store_new() makes it: half
	-- the default ceiling, rounded up.  A mount sends its own.
	{ 'tenant_max_parents', 32768 },
	{ 'tenant_max_children', 524288 },
	{ 'tenant_max_bytes', 536870912 },
	{ 'tenant_max_tombstones', 32768 },
	{ 'default_ttl_ms', 0 },
	{ 'drain_window_ms', 30000 },
	{ 'testclock', 0 },
	{ 'log_max', 65536 },
}

-- The store's refusal counters (enum store_refusal), by outcome.
local REFUSED = {
	ENOSPC = 'refused_capacity', EDQUOT = 'refused_quota',
	EFBIG = 'refused_payload', EROFS = 'refused_draining',
	EEXIST = 'refused_exists', ESTALE = 'refused_stale',
	EAGAIN = 'refused_conflict', ENOENT = 'refused_gone',
}

-- The limits that are durations: at most DURATION_MAX_MS (EINVAL).
local DURATIONS = { tombstone_ttl_ms = true, default_ttl_ms = true,
	drain_window_ms = true }

-- The gauges and counters meta starts with.
local META_ZERO = {
	'tenants', 'parents', 'children', 'links', 'tombstones', 'bytes',
	'admissions', 'removals', 'expiries', 'joins', 'leaves',
	'refused_capacity', 'refused_quota', 'refused_payload',
	'refused_draining', 'refused_exists', 'refused_stale',
	'refused_conflict', 'refused_gone',
}

--[[
  The one name rule (layout_name_check): a tenant (depth 1), parent (2)
  or child (3) name is 1..max_name bytes and has no control byte (< 0x20,
  0x7f), no white space and no '/', and is not "-" (the "does not apply"
  field of .events and .snapshot); a tenant or parent name does not
  begin with '.', a child's may ("." and ".." never).  Returns nil or
  the errno name.
]]
local function name_check(name, depth, max_name)
	if #name == 0 or name == '-' then return 'EINVAL' end
	if #name > max_name then return 'ENAMETOOLONG' end
	if string.byte(name, 1) == 46 and
		(depth ~= 3 or name == '.' or name == '..') then
		return 'EINVAL'
	end
	if string.find(name, '[%z\1-\32\127/]') then return 'EINVAL' end
	return nil
end

-- Arguments ------------------------------------------------------------------

-- A whole number as a decimal string.  (Lua's own conversion, in ".." and
-- when a number is passed to Redis, goes through "%.14g" and costs more
-- than a Redis command here: numbers are made strings once.)
local function dec(n) return string.format('%d', n) end

-- A whole number in decimal below 10^15 (so every sum of two stays exact
-- in Lua's doubles), or nil.
local function unum(s)
	if type(s) ~= 'string' or #s > 15 or not string.find(s, '^%d+$') then
		return nil
	end
	return tonumber(s)
end

-- An inode number argument, kept as the string it came as (it is only
-- ever put in key names and entries), or nil.  No leading zero: one
-- number, one key name.
local function ino_arg(s)
	if type(s) ~= 'string' or #s > 15 or not string.find(s, '^[1-9]%d*$') then
		return nil
	end
	return s
end

-- A time in ns since the epoch, kept as its decimal string (it does not
-- fit a double), or nil.
local function nstime(s)
	if type(s) ~= 'string' or #s > 20 or not string.find(s, '^%-?%d+$') then
		return nil
	end
	return s
end

-- "" is "not given"; anything else must be a unum.  Returns ok, value.
local function opt_unum(s)
	if s == nil or s == '' then return true, nil end
	local v = unum(s)
	return v ~= nil, v
end

-- Credentials: uid "" means none (the embedded store's NULL cred: no
-- check).  Returns cred (or nil) and whether the arguments were good.
local function cred_parse(uid, gid, groups)
	if uid == nil or uid == '' then return nil, true end
	local c = { uid = unum(uid), gid = unum(gid), groups = {} }
	if not c.uid or not c.gid then return nil, false end
	for g in string.gmatch(groups or '', '[^,]+') do
		local n = unum(g)
		if not n then return nil, false end
		c.groups[n] = true
	end
	return c, true
end

-- store_cred_may() (store/cred.c).
local function cred_may(c, uid, gid, mode, want)
	if c.uid == 0 then return true end
	local bits
	if c.uid == uid then
		bits = math.floor(mode / 64) % 8
	elseif c.gid == gid or c.groups[gid] then
		bits = math.floor(mode / 8) % 8
	else
		bits = mode % 8
	end
	return bit.band(bits, want) == want
end

-- store_cred_sticky_ok().
local function sticky_ok(c, dir_uid, dir_mode, uid)
	return bit.band(dir_mode, S_ISVTX) == 0 or c.uid == 0 or c.uid == uid or
		c.uid == dir_uid
end

-- Split "A/B" (a link "PINO/NAME", a tombstone "TID/NAME").
local function split(m)
	local a, b = string.match(m, '^([^/]*)/(.*)$')
	return a, b
end

-- Damage and the write phase ----------------------------------------------------
--
-- Redis never rolls a function back, so a call writes nothing until it
-- has read and checked all it needs: its hash writes wait in its records
-- (below) and its other commands in ctx.jr, in call order, and finish()
-- makes them at the end, once it has checked the type of every key they
-- write that the call did not read.  What a call finds that statefs did
-- not make (a key of another type, a field that is not a number, a
-- counter that would go below zero, a link to a state that is not
-- there, a tenant whose log says it lives and whose key is gone: another
-- client's damage, or Redis's own loss) stops it at once with outcome
-- EDAMAGED KEY, and nothing is written, not even a counter.

local function damaged(key) error({ damaged = key }, 0) end

-- The type each read command proves a key has (or none).
local RTYPE = { HMGET = 'hash', HGET = 'hash', HGETALL = 'hash',
	HSTRLEN = 'hash', ZRANGEBYSCORE = 'zset', GET = 'string' }

-- Read @cmd of @key: an error (WRONGTYPE) is damage.
local function rd(ctx, cmd, key, ...)
	local v = redis.pcall(cmd, key, ...)
	if type(v) == 'table' and v.err then damaged(key) end
	ctx.typed[key] = ctx.typed[key] or RTYPE[cmd]
	return v
end

-- Keep write @cmd of @key, on a key of type @kind ('new': none yet).
local function wr(ctx, kind, cmd, key, ...)
	ctx.jr[#ctx.jr + 1] = { kind = kind, cmd, key, ... }
end

-- Damage unless @key is of type @kind (or is none, but for 'new').
local function check_type(ctx, kind, key)
	if not kind or ctx.typed[key] == kind then return end
	local t = redis.call('TYPE', key).ok
	if t ~= 'none' and (kind == 'new' or t ~= kind) then damaged(key) end
	ctx.typed[key] = kind
end

-- @cmd KEY @list..., at most 1000 arguments a command.
local function call_chunked(cmd, key, list)
	for i = 1, #list, 1000 do
		redis.call(cmd, key, unpack(list, i, math.min(#list, i + 999)))
	end
end

-- Records ----------------------------------------------------------------------
--
-- A hash a call uses is a record: the fields the call needs are read once
-- (a list of them at once, HMGET, or one by one when first asked for),
-- changed in the record and written back in one HSET when the call ends
-- (finish), so every read in the call sees the call's own changes.  A
-- record that is deleted is never written back.  Whole hashes are never
-- loaded but the maps (a bucket, a tenant's parents and tombstones, the
-- store's tenants), whose fields are names: a map's field set to false
-- is deleted (HDEL).  Reading every field of a big hash costs more than
-- the transition.

-- The fields a call usually needs, read together; the first one of each
-- list is always present, so it tells whether the hash exists.
local MFIELDS = { 'instance', 'state', 'seq', 'ino', 'clock_ms', 'children',
	'links', 'bytes', 'admissions', 'removals' }
local TFIELDS = { 'name', 'tid', 'seq', 'state', 'links', 'children', 'bytes' }
local PFIELDS = { 'name', 'gen', 'deadline', 'links', 'mode', 'child_ttl' }
-- A state's content is read and written apart: it can be max_payload bytes.
local SFIELDS = { 'nlink', 'version', 'deadline', 'links' }

local function rec_add(ctx, r)
	r.ctx = ctx
	ctx.recs[r.key] = r
	ctx.order[#ctx.order + 1] = r
	return r
end

-- The record of hash @key.  A new record reads @fields (HMGET); a field
-- not read yet is read when asked for (HGET).  @fields[1] tells whether
-- the hash exists (r.live).  In r.h a field is nil until read and false
-- when the hash does not have it.
local function rec_open(ctx, key, fields)
	local r = ctx.recs[key]
	if r then return r end
	local v = rd(ctx, 'HMGET', key, unpack(fields))
	local h = {}
	for i = 1, #fields do h[fields[i]] = v[i] end
	return rec_add(ctx, { key = key, h = h, live = v[1] ~= false })
end

-- The map @key (a missing hash is an empty map).
local function map_open(ctx, key)
	return ctx.recs[key] or
		rec_add(ctx, { key = key, h = {}, live = true, fl = {} })
end

-- A hash this call makes: @fv lists every field and its value.
local function rec_new(ctx, key, fv)
	wr(ctx, 'new', 'HSET', key, unpack(fv))
	local h = {}
	for i = 1, #fv, 2 do h[fv[i]] = fv[i + 1] end
	return rec_add(ctx, { key = key, h = h, live = true, all = true,
		new = true })
end

-- Delete @r's hash and the keys @... that go with it.
local function rec_drop(r, ...)
	local ctx = r.ctx
	wr(ctx, nil, 'DEL', r.key, ...)
	for _, k in ipairs({ r.key, ... }) do
		local o = ctx.recs[k]
		if o then
			o.live = false
			o.d = nil
			if o.fl then o.h, o.fl, o.all = {}, {}, true end
		end
	end
end

local function get(r, f)
	local v = r.h[f]
	if v == nil then
		if r.all or not r.live then return nil end
		v = rd(r.ctx, 'HGET', r.key, f)
		r.h[f] = v
	end
	return v or nil
end

-- A number field (0 when the hash lacks it): a whole decimal, else damage.
local function num(r, f)
	local v = get(r, f)
	if v == nil or type(v) == 'number' then return v or 0 end
	local n = unum(v)
	if not n then damaged(r.key) end
	return n
end
local function str(r, f) return get(r, f) or '' end

-- An inode number field (a map's value, a name's ino), else damage.
local function ino_of(r, f)
	local v = get(r, f)
	if v and not ino_arg(v) then damaged(r.key) end
	return v
end

local STATE_RANK = { ready = 0, draining = 1, drained = 2 }

-- The state field of the store or of a tenant, else damage.
local function state_of(r)
	local v = str(r, 'state')
	if not STATE_RANK[v] then damaged(r.key) end
	return v
end

local function set(r, f, v)
	r.h[f] = v
	if not r.d then r.d = {} end
	r.d[f] = true
end

-- Add @d to number field @f: going below zero is damage.
local function add(r, f, d)
	local v = num(r, f) + d
	if v < 0 then damaged(r.key) end
	set(r, f, v)
end

-- Every field of map @r and its value, as HGETALL gives them.
local function map_all(r)
	if not r.all and r.live then
		local all = rd(r.ctx, 'HGETALL', r.key)
		for i = 1, #all, 2 do
			if r.h[all[i]] == nil then r.h[all[i]] = all[i + 1] end
			r.fl[#r.fl + 1] = all[i]
		end
		for f in pairs(r.d or {}) do r.fl[#r.fl + 1] = f end
		r.all = true
	end
	local out, seen = {}, {}
	for _, f in ipairs(r.fl) do
		if r.h[f] and not seen[f] then
			seen[f] = true
			out[#out + 1] = f
			out[#out + 1] = r.h[f]
		end
	end
	return out
end

local function mset(r, f, v)
	if r.all and r.h[f] == nil then r.fl[#r.fl + 1] = f end
	set(r, f, v)
end

local function flush(r)
	if not r.live or not r.d then return end
	local a, del = {}, {}
	for f in pairs(r.d) do
		if r.h[f] == false then
			del[#del + 1] = f
		else
			a[#a + 1] = f
			a[#a + 1] = r.h[f]
		end
	end
	if #a > 0 then call_chunked('HSET', r.key, a) end
	if #del > 0 then call_chunked('HDEL', r.key, del) end
	r.d = nil
end

-- The call ---------------------------------------------------------------------

local cur_ctx -- the call that runs, for its EDAMAGED outcome

-- The limits of a store instance never change once recorded, so they are
-- read once per instance and kept here, by meta key, between calls.
local limits_seen = {}

local function limits_of(M)
	local inst = M.h.instance
	local c = limits_seen[M.key]
	if inst and c and c.instance == inst then return c.lim end
	local lim = {}
	for _, l in ipairs(LIMITS) do
		local f = 'lim_' .. l[1]
		lim[l[1]] = get(M, f) and num(M, f) or l[2]
	end
	if inst then limits_seen[M.key] = { instance = inst, lim = lim } end
	return lim
end

-- The names a store prefix makes, by meta key, also kept between calls.
local names_seen = {}

local function names_of(mk)
	local n = names_seen[mk]
	if n then return n end
	local P = string.match(mk, '^(.*):{.*}:meta$')
	if not P or mk ~= P .. ':{' .. P .. '}:meta' then
		error('statefs: the first key must be PREFIX:{PREFIX}:meta')
	end
	n = { P = P, root = P .. ':{' .. P .. '}', head = P .. ':{' .. P .. '.t' }
	names_seen[mk] = n
	return n
end

local function expired(deadline, now)
	return deadline > 0 and deadline <= now
end

local function tenant_key(ctx, tid)
	return ctx.P .. ':{' .. ctx.P .. '.t' .. tid .. '}:t'
end

-- The tenant whose record is @key (a tenant that does not exist, or no
-- longer, has live = false; one whose log lives on with no end in
-- sight, as only a live tenant's does, is damage).
local function tenant_rec(ctx, key)
	local T = rec_open(ctx, key, TFIELDS)
	if not T.pre then
		T.pre = string.sub(key, 1, -3)
		T.keys = {}
		if not T.live and redis.call('PTTL', T.pre .. ':log') == -1 then
			damaged(key)
		end
	end
	return T
end

-- The key of tenant @T's @what ('parents', 'tombs', 'due', 'log').
local function tkey(T, what)
	local k = T.keys[what]
	if not k then
		k = T.pre .. ':' .. what
		T.keys[what] = k
	end
	return k
end
local function nkey(T, what, ino) return T.pre .. ':' .. what .. ':' .. ino end

local function parent_rec(ctx, T, pino)
	local P = rec_open(ctx, nkey(T, 'p', pino), PFIELDS)
	P.ino = pino
	return P
end

local function state_rec(ctx, T, sino)
	local S = rec_open(ctx, nkey(T, 's', sino), SFIELDS)
	S.ino = sino
	return S
end

-- Dead (removed) or past its deadline at now: no operation may use it.
local function gone(ctx, r)
	return not r.live or expired(num(r, 'deadline'), ctx.now)
end

-- Does the store, or tenant @T, refuse new things (a drain)?
local function draining(ctx, T)
	return state_of(ctx.M) ~= 'ready' or
		(T ~= nil and T.live and state_of(T) ~= 'ready')
end

-- The outcome's seq: the tenant's when the call has one, else the root's.
local function cur_seq(ctx)
	if ctx.T and ctx.T.live then return num(ctx.T, 'seq') end
	if ctx.T then return ctx.T.lastseq or 0 end
	return num(ctx.M, 'seq')
end

local function ok(ctx, ...)
	local out = { 'OK', ctx.now, cur_seq(ctx) }
	for _, v in ipairs({ ... }) do out[#out + 1] = v end
	return out
end

-- A refusal the embedded store counts (store.c refuse()).
local function refuse(ctx, code)
	add(ctx.M, REFUSED[code], 1)
	return { code, ctx.now, cur_seq(ctx) }
end

-- A refusal the embedded store does not count, or a bad argument.
local function fail(ctx, code, ...)
	local out = { code, ctx.now, cur_seq(ctx) }
	for _, v in ipairs({ ... }) do out[#out + 1] = v end
	return out
end

-- The write phase: check the type of every key to be written that the
-- call did not read (damage stops it before its first write), make the
-- kept commands in order, write back every changed record, keep the
-- outcome for a retry, return it.
local function finish(ctx, out)
	for _, w in ipairs(ctx.jr) do check_type(ctx, w.kind, w[2]) end
	for _, r in ipairs(ctx.order) do
		if r.live and r.d then check_type(ctx, r.new and 'new' or 'hash', r.key) end
	end
	for _, w in ipairs(ctx.jr) do redis.call(unpack(w)) end
	for _, r in ipairs(ctx.order) do flush(r) end
	if ctx.opkey then
		redis.call('SET', ctx.opkey, cmsgpack.pack(out), 'PX', OP_KEEP_MS)
	end
	return out
end

--[[
  The common start of every function: keys, TIME (once), the instance,
  the operation record, the deadline.  @scope: 'root' (keys[1] only is
  the call's), 'tenant' (keys[2] is the tenant the call is about), 'init'
  (no instance yet), 'read' (read-only: no record, no deadline).  Returns
  the context, or nil and the outcome to return at once.
]]
local function begin(keys, args, scope)
	local mk = keys[1] or ''
	local names = names_of(mk)
	local ctx = { keys = keys, args = args, P = names.P, root = names.root,
		recs = {}, order = {}, typed = {}, jr = {} }
	cur_ctx = ctx
	local t = redis.call('TIME')
	local sec, usec = tonumber(t[1]), tonumber(t[2])
	ctx.real_ms = sec * 1000 + math.floor(usec / 1000)
	ctx.ns = t[1] .. string.format('%06d', usec) .. '000'
	ctx.M = rec_open(ctx, mk, MFIELDS)
	local M = ctx.M
	ctx.lim = limits_of(M)
	ctx.now = ctx.real_ms
	if ctx.lim.testclock == 1 then ctx.now = num(M, 'clock_ms') end
	local head = names.head
	for i = 2, #keys do
		if string.find(keys[i], head, 1, true) ~= 1 or
			not string.find(keys[i], '^%d+}:t$', #head + 1) then
			error('statefs: a tenant key must be PREFIX:{PREFIX.tTID}:t')
		end
	end
	if scope == 'init' then return ctx end
	if not M.live or args[1] ~= str(M, 'instance') then
		return nil, { 'ESTALEINST', ctx.now, 0, str(M, 'instance') }
	end
	if scope == 'read' then return ctx end
	if scope == 'tenant' then
		ctx.T = tenant_rec(ctx, keys[2])
	end
	local opid = args[2] or ''
	-- "MOUNT:N": the mount that asks, which every entry names (by).
	ctx.by = string.match(opid, '^([^:]*):') or ''
	if opid ~= '' then
		ctx.opkey = (scope == 'tenant' and ctx.T.pre or ctx.root) .. ':op:' .. opid
		local rec = redis.call('GET', ctx.opkey)
		if rec then return nil, cmsgpack.unpack(rec) end
	end
	-- The deadline is on TIME, not on ctx.now: under testclock the
	-- store's clock stands still while Redis is busy, so a call held
	-- up past store_timeout would still be in time by it.
	local deadline = unum(args[3] or '')
	if deadline and deadline > 0 and ctx.real_ms > deadline then
		-- Not recorded: nothing was decided, and no later run of this
		-- operation can be before its deadline either.
		return nil, { 'ETIMEDOUT', ctx.now, cur_seq(ctx), ctx.real_ms }
	end
	return ctx
end

-- sfs_fence (see the calling convention): the recorded outcome of the
-- operation, or its refusal, recorded now.  begin() returns the record
-- when there is one; else the refusal is recorded as an outcome, so a
-- later run of the call finds it (begin) and does nothing.
local function fn_fence(keys, args)
	local ctx, early = begin(keys, { args[1], args[2], '' },
		#keys >= 2 and 'tenant' or 'root')
	if not ctx then return early end
	if not ctx.opkey then return fail(ctx, 'EINVAL') end
	return finish(ctx, fail(ctx, 'ETIMEDOUT', ctx.real_ms))
end

-- Logs ------------------------------------------------------------------------

local function xadd(ctx, key, seq, nseq, op, fields)
	local by = ctx.by or ''
	if nseq > 1 then
		wr(ctx, 'stream', 'XADD', key, 'MAXLEN', '~', ctx.lim.log_max, '*',
			'seq', seq, 'nseq', nseq, 'op', op, 'ms', ctx.now, 'ns', ctx.ns,
			'by', by, unpack(fields))
	else
		wr(ctx, 'stream', 'XADD', key, 'MAXLEN', '~', ctx.lim.log_max, '*',
			'seq', seq, 'op', op, 'ms', ctx.now, 'ns', ctx.ns, 'by', by,
			unpack(fields))
	end
end

-- Append one entry standing for @nlines .events lines (at least one seq
-- is consumed) to tenant @T's log.  Returns its first seq.
local function tlog(ctx, T, op, nlines, fields)
	local n = nlines > 1 and nlines or 1
	local seq = num(T, 'seq') + 1
	set(T, 'seq', seq + n - 1)
	T.lastseq = seq + n - 1
	xadd(ctx, tkey(T, 'log'), seq, n, op, fields)
	return seq
end

-- Append one entry to the root log.
local function rlog(ctx, op, fields)
	local seq = num(ctx.M, 'seq') + 1
	set(ctx.M, 'seq', seq)
	xadd(ctx, ctx.root .. ':log', seq, 1, op, fields)
	return seq
end

-- Gauges -------------------------------------------------------------------------

-- A gauge kept per tenant and store-wide.
local function gauge(ctx, T, f, d)
	add(T, f, d)
	add(ctx.M, f, d)
end

-- Hand out @n inode numbers; the first, as a decimal string (inode
-- numbers are only ever compared and put in names).
local function alloc_ino(ctx, n)
	local v = num(ctx.M, 'ino')
	if v < FIRST_INO then damaged(ctx.M.key) end
	set(ctx.M, 'ino', v + n)
	return dec(v)
end

local function touch(ctx, r)
	set(r, 'mtime', ctx.ns)
	set(r, 'ctime', ctx.ns)
end

-- The maps of tenant @T: its parents, its tombstones, a bucket.
local function tmap(ctx, T, what) return map_open(ctx, tkey(T, what)) end
local function bucket(ctx, T, pino) return map_open(ctx, nkey(T, 'l', pino)) end
local function tenants_map(ctx) return map_open(ctx, ctx.root .. ':tenants') end

-- Tombstones --------------------------------------------------------------------

-- Tombstone @name of @T: { gen, deadline } or nil, due or not.
local function tomb_get(ctx, T, name)
	local tm = tmap(ctx, T, 'tombs')
	local v = get(tm, name)
	if not v then return nil end
	local g, d = string.match(v, '^(%d+) (%d+)$')
	if not g or #v > 32 then damaged(tm.key) end
	return { gen = tonumber(g), deadline = tonumber(d) }
end

-- The store's queue of tombstones, as this call has changed it.
local function tombq(ctx, m, deadline)
	local q = ctx.root .. ':tombq'
	ctx.tq = ctx.tq or {}
	if deadline then
		wr(ctx, 'zset', 'ZADD', q, deadline, m)
	else
		wr(ctx, 'zset', 'ZREM', q, m)
	end
	ctx.tq[m] = deadline or false
end

local function tomb_put(ctx, T, name, gen, deadline)
	mset(tmap(ctx, T, 'tombs'), name, dec(gen) .. ' ' .. dec(deadline))
	tombq(ctx, str(T, 'tid') .. '/' .. name, deadline)
end

local function tomb_drop(ctx, T, name)
	mset(tmap(ctx, T, 'tombs'), name, false)
	tombq(ctx, str(T, 'tid') .. '/' .. name, nil)
	gauge(ctx, T, 'tombstones', -1)
end

-- A tombstone past its deadline ages out (no .events line).
local function tomb_age(ctx, T, name)
	tomb_drop(ctx, T, name)
	tlog(ctx, T, 'tomb_age', 0, { 'name', name })
end

-- The live tombstone of @name, aging it out if due (tomb_find_locked).
local function tomb_find(ctx, T, name)
	local tb = tomb_get(ctx, T, name)
	if tb and tb.deadline <= ctx.now then
		tomb_age(ctx, T, name)
		return nil
	end
	return tb
end

-- File a tombstone whose place in the pool the caller has counted in
-- meta (reserved, or an expiry's overshoot).  Returns its deadline.
local function tomb_insert(ctx, T, name, gen)
	local deadline = ctx.now + ctx.lim.tombstone_ttl_ms
	tomb_put(ctx, T, name, gen, deadline)
	add(T, 'tombstones', 1)
	return deadline
end

-- Age out due tombstones store-wide, oldest first, at most @budget
-- (tombs_reap).  Returns how many.
local function tombs_reap(ctx, budget)
	local q = ctx.root .. ':tombq'
	local due = rd(ctx, 'ZRANGEBYSCORE', q, '-inf', ctx.now, 'LIMIT', 0, budget)
	-- What this call queued or took out is this call's.
	local tq, n = ctx.tq or {}, 0
	for m, d in pairs(tq) do
		if d and d <= ctx.now then due[#due + 1] = m end
	end
	for _, m in ipairs(due) do
		local tid, name = split(m)
		local d = tq[m]
		if not tid or not string.find(tid, '^%d+$') then damaged(q) end
		if n < budget and (d == nil or (d and d <= ctx.now)) then
			local T = tenant_rec(ctx, tenant_key(ctx, tid))
			local tb = T.live and tomb_get(ctx, T, name)
			if tb and tb.deadline <= ctx.now then
				tomb_age(ctx, T, name)
				n = n + 1
			else
				tombq(ctx, m, nil) -- left behind: never expected
			end
		end
	end
	return n
end

-- Would one more tombstone of @T pass the pool (ENOSPC) or the tenant's
-- share of it (EDQUOT)?  nil when it fits (tomb_reserve_locked).
local function tomb_full(ctx, T)
	if num(ctx.M, 'tombstones') + 1 > ctx.lim.max_tombstones then return 'ENOSPC' end
	local share = ctx.lim.tenant_max_tombstones
	if share > 0 and num(T, 'tombstones') + 1 > share then return 'EDQUOT' end
	return nil
end

-- Drop every tombstone of @T (tenant cleanup, drain clear).
local function tombs_drop_all(ctx, T)
	local all = map_all(tmap(ctx, T, 'tombs'))
	for i = 1, #all, 2 do tomb_drop(ctx, T, all[i]) end
end

-- States and links ----------------------------------------------------------------

-- The length of @S's content, and the content.
local function data_len(S)
	local d = S.h.data
	if type(d) == 'string' then return #d end
	return rd(S.ctx, 'HSTRLEN', S.key, 'data')
end
local function data_of(S)
	if S.h.data == nil then S.h.data = rd(S.ctx, 'HGET', S.key, 'data') end
	return S.h.data or ''
end

-- State @S's last link went: account its end (@expiry: as an expiry, else
-- a removal) and delete it.
local function state_end(ctx, T, S, expiry)
	gauge(ctx, T, 'bytes', -data_len(S))
	gauge(ctx, T, 'children', -1)
	add(ctx.M, expiry and 'expiries' or 'removals', 1)
	if num(S, 'deadline') > 0 then wr(ctx, 'zset', 'ZREM', tkey(T, 'due'), 's:' .. S.ino) end
	rec_drop(S)
end

-- The links of @S, newest first, as "PINO/NAME" (the order the embedded
-- store reports them in: a new link goes to the front of its list);
-- with @counted, as many as its nlink, else damage.
local function state_links(S, counted)
	local all = {}
	for m in string.gmatch(str(S, 'links'), '%S+') do
		if not string.find(m, '^[1-9]%d*/[^/]+$') then damaged(S.key) end
		all[#all + 1] = m
	end
	if counted and #all ~= num(S, 'nlink') then damaged(S.key) end
	return all
end

-- Take @member, one of them, out of @S's links (its link count is the
-- caller's).
local function links_del(S, member)
	local rest, all = {}, state_links(S)
	for _, m in ipairs(all) do
		if m ~= member then rest[#rest + 1] = m end
	end
	if #rest ~= #all - 1 then damaged(S.key) end
	set(S, 'links', table.concat(rest, ' '))
end

-- State @S loses link @member ("PINO/NAME"); ends when it was the last
-- (state_unlink_locked).  Returns true then.
local function state_unlink(ctx, T, S, member, expiry)
	state_links(S, true)
	links_del(S, member)
	add(S, 'nlink', -1)
	if num(S, 'nlink') == 0 then
		state_end(ctx, T, S, expiry)
		return true
	end
	set(S, 'ctime', ctx.ns)
	return false
end

-- Add link @member to @S's links, as its newest.
local function state_link(S, member)
	local l = str(S, 'links')
	set(S, 'links', l == '' and member or member .. ' ' .. l)
end

-- The live parent record of @pino that a link or a map names, else damage.
local function parent_named(ctx, T, pino)
	local P = parent_rec(ctx, T, pino)
	if not P.live then damaged(P.key) end
	return P
end

-- The .events lines of @S's links: "PARENT/CHILD" each, newest link first.
local function link_lines(ctx, T, S)
	local lines = {}
	for _, m in ipairs(state_links(S, true)) do
		local pino, name = split(m)
		lines[#lines + 1] = str(parent_named(ctx, T, pino), 'name') .. '/' .. name
	end
	return lines
end

-- The state entry @i of bucket @B's fields names, else damage.
local function linked_state(ctx, T, B, sino)
	if not ino_arg(sino) then damaged(B.key) end
	local S = state_rec(ctx, T, sino)
	if not S.live then damaged(S.key) end
	return S
end

-- Find @name in @P: the state, or nil and, when the entry's state has
-- expired, that state (link_find_locked).
local function link_find(ctx, T, P, name)
	local B = bucket(ctx, T, P.ino)
	local sino = get(B, name)
	if not sino then return nil end
	local S = linked_state(ctx, T, B, sino)
	if expired(num(S, 'deadline'), ctx.now) then return nil, S end
	return S
end

-- State @S has passed its deadline: every link goes, in one step, each
-- reported as an expire line (child_expire).
local function child_expire(ctx, T, S)
	local lines = {}
	local ver = num(S, 'version')
	for _, m in ipairs(state_links(S, true)) do
		local pino, name = split(m)
		local P = parent_named(ctx, T, pino)
		mset(bucket(ctx, T, pino), name, false)
		add(P, 'links', -1)
		touch(ctx, P)
		gauge(ctx, T, 'links', -1)
		lines[#lines + 1] = str(P, 'name') .. '/' .. name
	end
	set(S, 'nlink', 0)
	set(S, 'links', '')
	state_end(ctx, T, S, true)
	tlog(ctx, T, 'expire', #lines, { 'kind', 'child', 'ino', S.ino,
		'ver', ver, 'lines', table.concat(lines, ' ') })
end

-- Parents --------------------------------------------------------------------------

-- Parent @P leaves the tenant: every link of its bucket goes (a state
-- shared with another parent loses only this link; states that end are
-- removals), then the parent (parent_unhook_locked).  No log entry: the
-- caller's entry stands for the whole cascade.
local function parent_remove(ctx, T, P)
	local B = bucket(ctx, T, P.ino)
	local links = map_all(B)
	if #links / 2 ~= num(P, 'links') then damaged(P.key) end
	for i = 1, #links, 2 do
		local S = linked_state(ctx, T, B, links[i + 1])
		state_unlink(ctx, T, S, P.ino .. '/' .. links[i], false)
	end
	gauge(ctx, T, 'links', -num(P, 'links'))
	wr(ctx, 'zset', 'ZREM', tkey(T, 'due'), 'p:' .. P.ino)
	mset(tmap(ctx, T, 'parents'), str(P, 'name'), false)
	rec_drop(P, B.key)
	gauge(ctx, T, 'parents', -1)
	touch(ctx, T)
end

-- Parent @P has passed its deadline: it leaves as by rmdir, with its
-- tombstone even over max_tombstones (an expiry cannot be refused).
local function parent_expire(ctx, T, P)
	local name, gen = str(P, 'name'), num(P, 'gen')
	local tomb = tomb_insert(ctx, T, name, gen)
	add(ctx.M, 'tombstones', 1)
	add(ctx.M, 'expiries', 1)
	add(ctx.M, 'leaves', 1)
	tlog(ctx, T, 'expire', 1, { 'kind', 'parent', 'name', name,
		'ino', P.ino, 'gen', gen, 'tomb', tomb })
	parent_remove(ctx, T, P)
end

-- The live parent @name of @T, reaping an expired one on the way
-- (parent_find_locked).
local function parent_find(ctx, T, name)
	local pino = ino_of(tmap(ctx, T, 'parents'), name)
	if not pino then return nil end
	local P = parent_named(ctx, T, pino)
	if expired(num(P, 'deadline'), ctx.now) then
		parent_expire(ctx, T, P)
		return nil
	end
	return P
end

-- Could @cred remove parent @P with what it holds by hand, emptying it
-- first (may_remove_parent_locked)?
local function may_remove_parent(ctx, T, P, cred)
	if not cred or cred.uid == 0 then return true end
	local pmode, puid = num(P, 'mode'), num(P, 'uid')
	if not sticky_ok(cred, num(T, 'uid'), num(T, 'mode'), puid) then
		return false
	end
	local wx = cred_may(cred, puid, num(P, 'gid'), pmode, MAY_W + MAY_X)
	local sticky = bit.band(pmode, S_ISVTX) ~= 0 and cred.uid ~= puid
	if wx and not sticky then return true end
	local B = bucket(ctx, T, P.ino)
	local links = map_all(B)
	for i = 2, #links, 2 do
		local S = linked_state(ctx, T, B, links[i])
		if not expired(num(S, 'deadline'), ctx.now) then
			if not wx then return false end
			if num(S, 'uid') ~= cred.uid then return false end
		end
	end
	return true
end

-- The parents of @T in the order they joined (ascending inode number).
local function parents_in_order(ctx, T)
	local pm = tmap(ctx, T, 'parents')
	local all = map_all(pm)
	local ps = {}
	for i = 2, #all, 2 do
		if not ino_arg(all[i]) then damaged(pm.key) end
		ps[#ps + 1] = tonumber(all[i])
	end
	table.sort(ps)
	for i, pino in ipairs(ps) do ps[i] = parent_named(ctx, T, dec(pino)) end
	return ps
end

-- Tenants -----------------------------------------------------------------------------

-- Remove every parent of @T with its cascade and every tombstone
-- (tenant_clear_locked).  Returns the removed parents' names.
local function tenant_clear(ctx, T)
	local names = {}
	for _, P in ipairs(parents_in_order(ctx, T)) do
		names[#names + 1] = str(P, 'name')
		parent_remove(ctx, T, P)
		add(ctx.M, 'leaves', 1)
	end
	tombs_drop_all(ctx, T)
	return names
end

-- @T is gone from the store: its keys go; its log stays a while for its
-- followers (they learn of the end from the root log too).
local function tenant_delete(ctx, T)
	mset(tenants_map(ctx), str(T, 'name'), false)
	add(ctx.M, 'tenants', -1)
	wr(ctx, nil, 'PEXPIRE', tkey(T, 'log'), LOG_KEEP_MS)
	T.lastseq = num(T, 'seq')
	rec_drop(T, tkey(T, 'parents'), tkey(T, 'tombs'), tkey(T, 'due'))
end

-- Could @cred empty tenant @T by hand (tenant_lock_for_cascade)?
local function may_clear_tenant(ctx, T, cred)
	local live = 0
	for _, P in ipairs(parents_in_order(ctx, T)) do
		if not expired(num(P, 'deadline'), ctx.now) then
			live = live + 1
			if not may_remove_parent(ctx, T, P, cred) then return false end
		end
	end
	if live > 0 then
		return cred_may(cred, num(T, 'uid'), num(T, 'gid'), num(T, 'mode'),
			MAY_W + MAY_X)
	end
	return true
end

-- Drain ----------------------------------------------------------------------------------

local function drain_due(ctx, T)
	local r = T or ctx.M
	return state_of(r) == 'draining' and
		(ctx.now >= num(r, 'drain_deadline') or num(r, 'children') == 0)
end

-- Clear tenant @T for a drain: every parent (one drain line each, in
-- join order), every tombstone; with @dead (a drain of the whole store)
-- the tenant goes too, with one more drain line.
local function drain_clear_tenant(ctx, T, dead)
	local names = tenant_clear(ctx, T)
	set(T, 'state', 'drained')
	local n = #names + (dead and 1 or 0)
	local f = { 'clear', 1, 'parents', table.concat(names, ' ') }
	if dead then
		f[#f + 1] = 'dead'
		f[#f + 1] = 1
	end
	tlog(ctx, T, 'drain', n, f)
	if dead then tenant_delete(ctx, T) end
end

-- The tenants of the store in the order they were made (ascending tid).
local function tenants_in_order(ctx)
	local tm = tenants_map(ctx)
	local all = map_all(tm)
	local ids = {}
	for i = 2, #all, 2 do
		if not ino_arg(all[i]) then damaged(tm.key) end
		ids[#ids + 1] = tonumber(all[i])
	end
	table.sort(ids)
	local ts = {}
	for _, tid in ipairs(ids) do
		local T = tenant_rec(ctx, tenant_key(ctx, tid))
		if not T.live then damaged(T.key) end
		ts[#ts + 1] = T
	end
	return ts
end

-- Clear the store for its drain: every tenant goes; the store is drained.
local function drain_clear_store(ctx)
	local n = 0
	for _, T in ipairs(tenants_in_order(ctx)) do
		drain_clear_tenant(ctx, T, true)
		n = n + 1
	end
	set(ctx.M, 'state', 'drained')
	rlog(ctx, 'drained', { 'tenants', n })
end

-- Settle what is due: the store's drain, then @T's (drains_settle_all).
local function drains_settle(ctx, T)
	if drain_due(ctx, nil) then drain_clear_store(ctx) end
	if T and T.live and drain_due(ctx, T) then drain_clear_tenant(ctx, T, false) end
end

-- Expire @T's leases that are due, at most @budget, oldest deadline first.
local function leases_expire(ctx, T, budget)
	local dk = tkey(T, 'due')
	local due = rd(ctx, 'ZRANGEBYSCORE', dk, '-inf', ctx.now, 'LIMIT', 0, budget)
	local done = 0
	for _, m in ipairs(due) do
		local kind, ino = string.match(m, '^([ps]):([1-9]%d*)$')
		if not kind then damaged(dk) end
		local R = kind == 'p' and parent_rec(ctx, T, ino) or state_rec(ctx, T, ino)
		if R.live and expired(num(R, 'deadline'), ctx.now) then
			if kind == 'p' then parent_expire(ctx, T, R) else child_expire(ctx, T, R) end
			done = done + 1
		elseif not R.live then
			wr(ctx, 'zset', 'ZREM', dk, m)
		end
	end
	return done
end

-- Publication ------------------------------------------------------------------------------

-- Would content of @newlen bytes in place of @oldlen in tenant @T fit?
-- (max_payload, then the growth in max_bytes and in the tenant's share
-- of it: bytes_charge_locked.)
local function bytes_check(ctx, T, oldlen, newlen)
	if newlen > ctx.lim.max_payload then return 'EFBIG' end
	if newlen > oldlen then
		local grow = newlen - oldlen
		if num(ctx.M, 'bytes') + grow > ctx.lim.max_bytes then return 'ENOSPC' end
		local share = ctx.lim.tenant_max_bytes
		if share > 0 and num(T, 'bytes') + grow > share then return 'EDQUOT' end
	end
	return nil
end

-- Publish @data as @S's content (publish_locked): version + 1, mtime and
-- ctime now.  Returns the new version and the entry fields that describe
-- it, and how many .events lines (one write line per link).
local function publish(ctx, T, S, data, oldlen)
	gauge(ctx, T, 'bytes', #data - oldlen)
	set(S, 'data', data)
	add(S, 'version', 1)
	touch(ctx, S)
	local lines = link_lines(ctx, T, S)
	return num(S, 'version'), { 'ino', S.ino, 'ver', num(S, 'version'),
		'data', data, 'lines', table.concat(lines, ' ') }, #lines
end

-- Functions ----------------------------------------------------------------------------------

local function fn_version(keys, args)
	return LIBVERSION
end

-- sfs_init: see the essay.
local function fn_init(keys, args)
	local ctx = begin(keys, args, 'init')
	local M = ctx.M
	local client = unum(args[4] or '')
	local candidate = args[5] or ''
	local adopt = args[6] == '1'
	local given = {}
	for _, l in ipairs(LIMITS) do given[l[1]] = l[2] end
	if not client then return fail(ctx, 'EINVAL', 'libversion') end
	for i = 7, #args, 2 do
		local name, v = args[i], unum(args[i + 1] or '')
		if given[name] == nil or v == nil then
			return fail(ctx, 'EINVAL', name)
		end
		given[name] = v
	end
	if given.testclock > 1 then return fail(ctx, 'EINVAL', 'testclock') end
	for _, l in ipairs(LIMITS) do
		if DURATIONS[l[1]] and given[l[1]] > DURATION_MAX_MS then
			return fail(ctx, 'EINVAL', l[1])
		end
	end
	if given.log_max < 1 then return fail(ctx, 'EINVAL', 'log_max') end
	local created = 0
	if M.live and str(M, 'instance') ~= '' then
		if client < LIBVERSION then
			return fail(ctx, 'ELIBVERSION', LIBVERSION)
		end
		if not adopt then
			for _, l in ipairs(LIMITS) do
				local rec = ctx.lim[l[1]]
				if rec ~= given[l[1]] then
					return fail(ctx, 'ELIMITS', l[1], rec, given[l[1]])
				end
			end
		end
		-- A limit a later library added is recorded at its default.
		for _, l in ipairs(LIMITS) do
			if get(M, 'lim_' .. l[1]) == nil then set(M, 'lim_' .. l[1], ctx.lim[l[1]]) end
		end
		if num(M, 'libversion') < LIBVERSION then set(M, 'libversion', LIBVERSION) end
	else
		if not string.find(candidate, '^%x+$') or #candidate ~= 16 then
			return fail(ctx, 'EINVAL', 'instance')
		end
		-- A store made anew (flushed, or a new Redis) may reuse the
		-- instance id a mount offers again: forget what was kept.
		limits_seen[M.key] = nil
		M.live = true
		set(M, 'instance', string.lower(candidate))
		set(M, 'libversion', LIBVERSION)
		set(M, 'ino', FIRST_INO)
		set(M, 'tid', 0)
		set(M, 'seq', 0)
		set(M, 'created_ms', ctx.real_ms)
		set(M, 'state', 'ready')
		set(M, 'drain_deadline', 0)
		set(M, 'clock_ms', 0)
		for _, f in ipairs(META_ZERO) do set(M, f, 0) end
		for _, l in ipairs(LIMITS) do set(M, 'lim_' .. l[1], given[l[1]]) end
		created = 1
		ctx.now = given.testclock == 1 and 0 or ctx.real_ms
	end
	local out = { 'OK', ctx.now, num(M, 'seq'), str(M, 'instance'), created }
	for _, l in ipairs(LIMITS) do
		out[#out + 1] = l[1]
		out[#out + 1] = num(M, 'lim_' .. l[1])
	end
	return finish(ctx, out)
end

-- sfs_mkdir_tenant (tenant_create).
local function fn_mkdir_tenant(keys, args)
	local ctx, early = begin(keys, args, 'root')
	if not ctx then return early end
	local M = ctx.M
	local name = args[4] or ''
	local uid, gid, mode = unum(args[5]), unum(args[6]), unum(args[7])
	if not (uid and gid and mode) then return finish(ctx, fail(ctx, 'EINVAL')) end
	local e = name_check(name, 1, ctx.lim.max_name)
	if e then return finish(ctx, fail(ctx, e)) end
	if draining(ctx, nil) then return finish(ctx, refuse(ctx, 'EROFS')) end
	if get(tenants_map(ctx), name) then return finish(ctx, refuse(ctx, 'EEXIST')) end
	if num(M, 'tenants') + 1 > ctx.lim.max_tenants then
		return finish(ctx, refuse(ctx, 'ENOSPC'))
	end
	local tid = num(M, 'tid') + 1
	set(M, 'tid', tid)
	local ino = alloc_ino(ctx, 1 + NSPECIAL)
	mode = mode % 4096
	mset(tenants_map(ctx), name, dec(tid))
	local T = rec_new(ctx, tenant_key(ctx, tid), {
		'name', name, 'tid', tid, 'ino', ino, 'uid', uid, 'gid', gid,
		'mode', mode, 'atime', ctx.ns, 'mtime', ctx.ns, 'ctime', ctx.ns,
		'seq', 0, 'state', 'ready', 'drain_deadline', 0, 'parents', 0,
		'children', 0, 'links', 0, 'tombstones', 0, 'bytes', 0 })
	T.pre = string.sub(T.key, 1, -3)
	T.keys = {}
	check_type(ctx, 'new', tkey(T, 'log')) -- a new tenant's log is new too
	ctx.T = T
	add(M, 'tenants', 1)
	tlog(ctx, T, 'join', 1, { 'kind', 'tenant', 'name', name, 'tid', tid,
		'ino', ino, 'uid', uid, 'gid', gid, 'mode', mode })
	local rseq = rlog(ctx, 'tenant', { 'name', name, 'tid', tid, 'ino', ino })
	return finish(ctx, ok(ctx, tid, tonumber(ino), rseq))
end

-- sfs_rmdir_tenant (tenant_cleanup).
local function fn_rmdir_tenant(keys, args)
	local ctx, early = begin(keys, args, 'root')
	if not ctx then return early end
	local name = args[4] or ''
	local cred, good = cred_parse(args[5], args[6], args[7])
	if not good then return finish(ctx, fail(ctx, 'EINVAL')) end
	local tm = tenants_map(ctx)
	local tid = ino_of(tm, name)
	if not tid then return finish(ctx, fail(ctx, 'ENOENT')) end
	local T = tenant_rec(ctx, tenant_key(ctx, tid))
	if not T.live then damaged(T.key) end
	if cred and cred.uid ~= 0 and not may_clear_tenant(ctx, T, cred) then
		return finish(ctx, fail(ctx, 'EACCES'))
	end
	ctx.T = T
	tenant_clear(ctx, T)
	tlog(ctx, T, 'cleanup', 1, { 'name', name, 'tid', tid })
	tenant_delete(ctx, T)
	local rseq = rlog(ctx, 'cleanup', { 'name', name, 'tid', tid })
	return finish(ctx, ok(ctx, rseq))
end

-- sfs_join (parent_join).
local function fn_join(keys, args)
	local ctx, early = begin(keys, args, 'tenant')
	if not ctx then return early end
	local T, M = ctx.T, ctx.M
	local name = args[4] or ''
	local uid, gid, mode = unum(args[5]), unum(args[6]), unum(args[7])
	if not (uid and gid and mode) then return finish(ctx, fail(ctx, 'EINVAL')) end
	local e = name_check(name, 2, ctx.lim.max_name)
	if e then return finish(ctx, fail(ctx, e)) end
	if not T.live then return finish(ctx, refuse(ctx, 'ESTALE')) end
	local old = parent_find(ctx, T, name)
	if draining(ctx, T) then return finish(ctx, refuse(ctx, 'EROFS')) end
	if old then return finish(ctx, refuse(ctx, 'EEXIST')) end
	if num(M, 'parents') + 1 > ctx.lim.max_parents then
		return finish(ctx, refuse(ctx, 'ENOSPC'))
	end
	local share = ctx.lim.tenant_max_parents
	if share > 0 and num(T, 'parents') + 1 > share then
		return finish(ctx, refuse(ctx, 'EDQUOT'))
	end
	local tb = tomb_find(ctx, T, name)
	local gen = tb and tb.gen + 1 or 1
	mode = mode % 4096
	local tmode = num(T, 'mode')
	if bit.band(tmode, S_ISGID) ~= 0 then
		gid = num(T, 'gid')
		mode = bit.bor(mode, S_ISGID)
	end
	local pino = alloc_ino(ctx, 1)
	rec_new(ctx, nkey(T, 'p', pino), {
		'name', name, 'gen', gen, 'uid', uid, 'gid', gid, 'mode', mode,
		'atime', ctx.ns, 'mtime', ctx.ns, 'ctime', ctx.ns, 'ttl', 0,
		'deadline', 0, 'child_ttl', 0, 'links', 0 })
	mset(tmap(ctx, T, 'parents'), name, pino)
	if tb then tomb_drop(ctx, T, name) end
	gauge(ctx, T, 'parents', 1)
	add(M, 'joins', 1)
	touch(ctx, T)
	tlog(ctx, T, 'join', 1, { 'kind', 'parent', 'name', name, 'ino', pino,
		'gen', gen, 'uid', uid, 'gid', gid, 'mode', mode })
	return finish(ctx, ok(ctx, tonumber(pino), gen))
end

-- sfs_leave and sfs_depart (parent_leave).
local function parent_leave(keys, args, must_exist)
	local ctx, early = begin(keys, args, 'tenant')
	if not ctx then return early end
	local T, M = ctx.T, ctx.M
	local op = must_exist and 'leave' or 'depart'
	local name = args[4] or ''
	local cred, good = cred_parse(args[5], args[6], args[7])
	if not good then return finish(ctx, fail(ctx, 'EINVAL')) end
	if not must_exist then
		-- .depart: the name was parsed by layout_parse_depart().
		local e = name_check(name, 2, ctx.lim.max_name)
		if e then return finish(ctx, fail(ctx, e)) end
	end
	if not T.live then return finish(ctx, refuse(ctx, 'ESTALE')) end
	local P = parent_find(ctx, T, name)
	local tb = tomb_find(ctx, T, name)
	if not P and must_exist then return finish(ctx, refuse(ctx, 'ENOENT')) end
	if not P and tb then
		-- Departed again before a rejoin: the tombstone's age starts over.
		local deadline = ctx.now + ctx.lim.tombstone_ttl_ms
		tomb_put(ctx, T, name, tb.gen, deadline)
		tlog(ctx, T, op, 1, { 'name', name, 'gen', tb.gen, 'tomb', deadline,
			'refresh', 1 })
		return finish(ctx, ok(ctx, tb.gen))
	end
	local full = tomb_full(ctx, T)
	if full then
		-- The pool, or the tenant's share of it, is full: age out what
		-- is due store-wide, once.
		if tombs_reap(ctx, ctx.lim.max_tombstones) == 0 then
			return finish(ctx, refuse(ctx, full))
		end
		full = tomb_full(ctx, T)
		if full then return finish(ctx, refuse(ctx, full)) end
	end
	if P and not may_remove_parent(ctx, T, P, cred) then
		return finish(ctx, fail(ctx, 'EACCES'))
	end
	local gen = P and num(P, 'gen') or 0
	add(M, 'tombstones', 1)
	local deadline = tomb_insert(ctx, T, name, gen)
	local f = { 'name', name, 'gen', gen, 'tomb', deadline }
	if P then
		f[#f + 1] = 'ino'
		f[#f + 1] = P.ino
	end
	tlog(ctx, T, op, 1, f)
	if P then
		parent_remove(ctx, T, P)
		add(M, 'leaves', 1)
	end
	return finish(ctx, ok(ctx, gen))
end

local function fn_leave(keys, args) return parent_leave(keys, args, true) end
local function fn_depart(keys, args) return parent_leave(keys, args, false) end

-- The admission checks of a new entry in @P (admit_locked), in the
-- contract's order: store ready, parent alive, ceilings, quotas.  Per
-- tenant shares of a ceiling go here too.
local function admit(ctx, T, P, new_state)
	if draining(ctx, T) then return 'EROFS' end
	if gone(ctx, P) then return 'ESTALE' end
	if new_state and num(ctx.M, 'children') + 1 > ctx.lim.max_children then
		return 'ENOSPC'
	end
	local pq, tq = ctx.lim.parent_quota, ctx.lim.tenant_quota
	if (pq > 0 and num(P, 'links') + 1 > pq) or
		(tq > 0 and num(T, 'links') + 1 > tq) then
		return 'EDQUOT'
	end
	local share = ctx.lim.tenant_max_children
	if new_state and share > 0 and num(T, 'children') + 1 > share then
		return 'EDQUOT'
	end
	return nil
end

-- Insert link @name -> @S into @P (link_insert_locked and the state
-- side, unless @S was made with it).
local function link_insert(ctx, T, P, name, S, made)
	mset(bucket(ctx, T, P.ino), name, S.ino)
	if not made then state_link(S, P.ino .. '/' .. name) end
	add(P, 'links', 1)
	touch(ctx, P)
	gauge(ctx, T, 'links', 1)
end

-- sfs_create (do_create).
local function fn_create(keys, args)
	local ctx, early = begin(keys, args, 'tenant')
	if not ctx then return early end
	local T, M = ctx.T, ctx.M
	local pino, name = ino_arg(args[4]), args[5] or ''
	local uid, gid, mode = unum(args[6]), unum(args[7]), unum(args[8])
	local excl = args[9] == '1'
	if not (pino and uid and gid and mode) then return finish(ctx, fail(ctx, 'EINVAL')) end
	local e = name_check(name, 3, ctx.lim.max_name)
	if e then return finish(ctx, fail(ctx, e)) end
	local P = parent_rec(ctx, T, pino)
	local old, exp
	-- Through a departed or expired parent nothing happens, not even the
	-- reaping of what it held.
	if not gone(ctx, P) then
		old, exp = link_find(ctx, T, P, name)
		if exp then child_expire(ctx, T, exp) end
	end
	if old then
		if excl then return finish(ctx, refuse(ctx, 'EEXIST')) end
		return finish(ctx, ok(ctx, tonumber(old.ino), 0))
	end
	e = admit(ctx, T, P, true)
	if e then return finish(ctx, refuse(ctx, e)) end
	local ttl = num(P, 'child_ttl')
	if ttl == 0 then ttl = ctx.lim.default_ttl_ms end
	mode = mode % 4096
	if bit.band(num(P, 'mode'), S_ISGID) ~= 0 then gid = num(P, 'gid') end
	local sino = alloc_ino(ctx, 1)
	local deadline = ttl > 0 and ctx.now + ttl or 0
	-- The state is written whole, its one link included.
	local S = rec_new(ctx, nkey(T, 's', sino), {
		'data', '', 'version', 0, 'nlink', 1, 'uid', uid, 'gid', gid,
		'mode', mode, 'atime', ctx.ns, 'mtime', ctx.ns, 'ctime', ctx.ns,
		'ttl', ttl, 'deadline', deadline, 'links', P.ino .. '/' .. name })
	S.ino = sino
	link_insert(ctx, T, P, name, S, true)
	gauge(ctx, T, 'children', 1)
	add(M, 'admissions', 1)
	if ttl > 0 then wr(ctx, 'zset', 'ZADD', tkey(T, 'due'), deadline, 's:' .. sino) end
	tlog(ctx, T, 'create', 1, { 'parent', str(P, 'name'), 'pino', P.ino,
		'child', name, 'ino', sino, 'gen', num(P, 'gen'), 'uid', uid,
		'gid', gid, 'mode', mode, 'ttl', ttl, 'deadline', deadline })
	return finish(ctx, ok(ctx, tonumber(sino), 1))
end

-- sfs_unlink (do_unlink).
local function fn_unlink(keys, args)
	local ctx, early = begin(keys, args, 'tenant')
	if not ctx then return early end
	local T = ctx.T
	local pino, name = ino_arg(args[4]), args[5] or ''
	if not pino then return finish(ctx, fail(ctx, 'EINVAL')) end
	local P = parent_rec(ctx, T, pino)
	if gone(ctx, P) then return finish(ctx, refuse(ctx, 'ESTALE')) end
	local S, exp = link_find(ctx, T, P, name)
	if not S then
		-- An expired child is gone already; it is reaped on the way.
		if exp then child_expire(ctx, T, exp) end
		return finish(ctx, refuse(ctx, 'ENOENT'))
	end
	local ver = num(S, 'version')
	mset(bucket(ctx, T, P.ino), name, false)
	add(P, 'links', -1)
	touch(ctx, P)
	gauge(ctx, T, 'links', -1)
	state_unlink(ctx, T, S, P.ino .. '/' .. name, false)
	tlog(ctx, T, 'unlink', 1, { 'parent', str(P, 'name'), 'pino', P.ino,
		'child', name, 'ino', S.ino, 'gen', num(P, 'gen'), 'ver', ver })
	return finish(ctx, ok(ctx))
end

-- sfs_link (do_link).
local function fn_link(keys, args)
	local ctx, early = begin(keys, args, 'tenant')
	if not ctx then return early end
	local T, M = ctx.T, ctx.M
	local sino, pino, name = ino_arg(args[4]), ino_arg(args[5]), args[6] or ''
	if not (sino and pino) or not keys[3] then return finish(ctx, fail(ctx, 'EINVAL')) end
	local e = name_check(name, 3, ctx.lim.max_name)
	if e then return finish(ctx, fail(ctx, e)) end
	local CT = tenant_rec(ctx, keys[3])
	local S = state_rec(ctx, CT, sino)
	local P = parent_rec(ctx, T, pino)
	if gone(ctx, S) or gone(ctx, P) then return finish(ctx, refuse(ctx, 'ESTALE')) end
	if CT ~= T then return finish(ctx, fail(ctx, 'EXDEV')) end
	local old, exp = link_find(ctx, T, P, name)
	if exp then child_expire(ctx, T, exp) end
	if old then return finish(ctx, refuse(ctx, 'EEXIST')) end
	e = admit(ctx, T, P, false)
	if e then return finish(ctx, refuse(ctx, e)) end
	-- The state must still live (an expiry on the way may have ended it).
	if gone(ctx, S) then return finish(ctx, refuse(ctx, 'ESTALE')) end
	link_insert(ctx, T, P, name, S)
	add(S, 'nlink', 1)
	set(S, 'ctime', ctx.ns)
	add(M, 'admissions', 1)
	tlog(ctx, T, 'link', 1, { 'parent', str(P, 'name'), 'pino', P.ino,
		'child', name, 'ino', S.ino, 'gen', num(P, 'gen'),
		'ver', num(S, 'version') })
	return finish(ctx, ok(ctx))
end

local RENAME_NOREPLACE, RENAME_EXCHANGE = 1, 2

-- sfs_rename (do_rename).
local function fn_rename(keys, args)
	local ctx, early = begin(keys, args, 'tenant')
	if not ctx then return early end
	local T = ctx.T
	local apino, name = ino_arg(args[4]), args[5] or ''
	local bpino, to_name = ino_arg(args[6]), args[7] or ''
	local flags = unum(args[8] or '0')
	if not (apino and bpino and flags) or not keys[3] or flags > 3 then
		return finish(ctx, fail(ctx, 'EINVAL'))
	end
	local e = name_check(to_name, 3, ctx.lim.max_name)
	if e then return finish(ctx, fail(ctx, e)) end
	local BT = tenant_rec(ctx, keys[3])
	local A = parent_rec(ctx, T, apino)
	local B = parent_rec(ctx, BT, bpino)
	if gone(ctx, A) or gone(ctx, B) then return finish(ctx, refuse(ctx, 'ESTALE')) end
	if BT ~= T then return finish(ctx, fail(ctx, 'EXDEV')) end
	if flags == RENAME_NOREPLACE + RENAME_EXCHANGE then
		return finish(ctx, fail(ctx, 'EINVAL'))
	end
	local src, dst, exp
	repeat
		src, exp = link_find(ctx, T, A, name)
		if not exp then dst, exp = link_find(ctx, T, B, to_name) end
		if exp then child_expire(ctx, T, exp) end
	until not exp
	if not src then return finish(ctx, refuse(ctx, 'ENOENT')) end
	local exchange = flags == RENAME_EXCHANGE
	if exchange then
		if not dst then return finish(ctx, refuse(ctx, 'ENOENT')) end
	elseif dst and flags == RENAME_NOREPLACE then
		return finish(ctx, refuse(ctx, 'EEXIST'))
	elseif dst and dst == src then
		-- POSIX: two links to one state: nothing happens.
		return finish(ctx, ok(ctx))
	end
	if draining(ctx, T) then return finish(ctx, refuse(ctx, 'EROFS')) end
	local X = src
	local xm, ym = A.ino .. '/' .. name, B.ino .. '/' .. to_name
	local f = { 'parent', str(A, 'name'), 'pino', A.ino, 'child', name,
		'to_parent', str(B, 'name'), 'to_pino', B.ino, 'to_child', to_name,
		'ino', X.ino, 'gen', num(B, 'gen') }
	local nlines = 1
	if exchange then
		-- The two entries trade states.
		if xm ~= ym then
			local Y = dst
			mset(bucket(ctx, T, A.ino), name, Y.ino)
			mset(bucket(ctx, T, B.ino), to_name, X.ino)
			links_del(X, xm)
			links_del(Y, ym)
			state_link(Y, xm)
			state_link(X, ym)
		end
		touch(ctx, A)
		touch(ctx, B)
		f[#f + 1] = 'ino2'
		f[#f + 1] = dst.ino
		f[#f + 1] = 'ver'
		f[#f + 1] = num(X, 'version')
		tlog(ctx, T, 'exchange', 1, f)
		return finish(ctx, ok(ctx))
	end
	if dst then
		-- The destination entry takes the source's state; its old state
		-- loses the link (a terminal removal when it was the last).
		local Y = dst
		f[#f + 1] = 'replaced'
		f[#f + 1] = Y.ino
		f[#f + 1] = 'replaced_ver'
		f[#f + 1] = num(Y, 'version')
		state_unlink(ctx, T, Y, ym, false)
		mset(bucket(ctx, T, B.ino), to_name, X.ino)
		links_del(X, xm)
		state_link(X, ym)
		mset(bucket(ctx, T, A.ino), name, false)
		add(A, 'links', -1)
		gauge(ctx, T, 'links', -1)
		nlines = 2
	else
		-- Admission at the destination: it gains an entry.
		local pq = ctx.lim.parent_quota
		if A ~= B and pq > 0 and num(B, 'links') + 1 > pq then
			return finish(ctx, refuse(ctx, 'EDQUOT'))
		end
		mset(bucket(ctx, T, B.ino), to_name, X.ino)
		add(B, 'links', 1)
		mset(bucket(ctx, T, A.ino), name, false)
		add(A, 'links', -1)
		links_del(X, xm)
		state_link(X, ym)
	end
	touch(ctx, A)
	touch(ctx, B)
	set(X, 'ctime', ctx.ns)
	f[#f + 1] = 'ver'
	f[#f + 1] = num(X, 'version')
	tlog(ctx, T, 'rename', nlines, f)
	return finish(ctx, ok(ctx))
end

-- sfs_publish (do_stage_publish).
local function fn_publish(keys, args)
	local ctx, early = begin(keys, args, 'tenant')
	if not ctx then return early end
	local T = ctx.T
	local sino, mode = ino_arg(args[4]), args[5]
	local base, data = unum(args[6] or ''), args[7]
	local g1, seen_version = opt_unum(args[8])
	local seen_mtime = (args[9] or '') ~= '' and nstime(args[9]) or nil
	if not sino or data == nil or not g1 or
		((args[9] or '') ~= '' and not seen_mtime) or
		(mode ~= 'replace' and mode ~= 'append' and mode ~= 'cas') or
		(mode == 'cas' and not base) then
		return finish(ctx, fail(ctx, 'EINVAL'))
	end
	local S = state_rec(ctx, T, sino)
	if gone(ctx, S) then return finish(ctx, refuse(ctx, 'ESTALE')) end
	if mode == 'cas' and num(S, 'version') ~= base then
		return finish(ctx, refuse(ctx, 'EAGAIN'))
	end
	local cur = data_len(S)
	if mode == 'append' then data = data_of(S) .. data end
	local e = bytes_check(ctx, T, cur, #data)
	if e then return finish(ctx, refuse(ctx, e)) end
	-- An mtime set after the stage last wrote (SEEN_VERSION and
	-- SEEN_MTIME: the version and mtime it saw then), with no publication
	-- in between, survives it (cp -p sets it before close).
	local keep = seen_version and seen_mtime and num(S, 'version') == seen_version and
		str(S, 'mtime') ~= seen_mtime and str(S, 'mtime')
	local ver, f, nlines = publish(ctx, T, S, data, cur)
	if keep then
		set(S, 'mtime', keep)
		f[#f + 1] = 'mtime'
		f[#f + 1] = keep
	end
	tlog(ctx, T, 'write', nlines, f)
	return finish(ctx, ok(ctx, ver))
end

-- The record of node @kind @ino (tenant, parent, child) of @T.
local function node_rec(ctx, T, kind, ino)
	if kind == 'tenant' then
		if str(T, 'ino') ~= ino then return { live = false, h = {} } end
		return T
	elseif kind == 'parent' then
		return parent_rec(ctx, T, ino)
	elseif kind == 'child' then
		return state_rec(ctx, T, ino)
	end
	return nil
end

-- sfs_setattr (do_setattr).
local function fn_setattr(keys, args)
	local ctx, early = begin(keys, args, 'tenant')
	if not ctx then return early end
	local T = ctx.T
	local kind, ino = args[4], ino_arg(args[5])
	local g1, mode = opt_unum(args[6])
	local g2, uid = opt_unum(args[7])
	local g3, gid = opt_unum(args[8])
	local atime = (args[9] or '') ~= '' and nstime(args[9]) or nil
	local mtime = (args[10] or '') ~= '' and nstime(args[10]) or nil
	local g4, size = opt_unum(args[11])
	local g5, kill = opt_unum(args[12])
	if kill == 0 then kill = nil end
	local renew = args[13] == '1' and (kind == 'parent' or kind == 'child')
	local R = ino and node_rec(ctx, T, kind, ino)
	if not (R and g1 and g2 and g3 and g4 and g5) or
		((args[9] or '') ~= '' and not atime) or
		((args[10] or '') ~= '' and not mtime) then
		return finish(ctx, fail(ctx, 'EINVAL'))
	end
	if gone(ctx, R) then return finish(ctx, fail(ctx, 'ESTALE')) end
	if size and kind ~= 'child' then return finish(ctx, fail(ctx, 'EISDIR')) end
	-- The renewal of a touch (STORE_SET_RENEW): a node with a lease is
	-- refused while draining; one without is a plain touch.
	local ttl = renew and num(R, 'ttl') or 0
	if ttl > 0 and draining(ctx, T) then return finish(ctx, refuse(ctx, 'EROFS')) end
	local op, f, nlines = 'attr', { 'kind', kind, 'ino', ino }, 1
	if size then
		if size > ctx.lim.max_payload then return finish(ctx, refuse(ctx, 'EFBIG')) end
		local cur = data_len(R)
		local e = bytes_check(ctx, T, cur, size)
		if e then return finish(ctx, refuse(ctx, e)) end
		local data = data_of(R)
		if size <= cur then
			data = string.sub(data, 1, size)
		else
			data = data .. string.rep('\0', size - cur)
		end
		local _, pf, n = publish(ctx, T, R, data, cur)
		op, f, nlines = 'write', pf, n
		f[#f + 1] = 'kind'
		f[#f + 1] = 'child'
	end
	if mode or kill then
		-- The kill bits clear set-user-ID (1) and set-group-ID (2)
		-- from the mode as it is then, so a concurrent chmod stands.
		local m = mode and mode % 4096 or num(R, 'mode')
		if kill and bit.band(kill, 1) ~= 0 then m = bit.band(m, 4095 - 2048) end
		if kill and bit.band(kill, 2) ~= 0 then m = bit.band(m, 4095 - S_ISGID) end
		mode = m
	end
	if mode or uid or gid or atime or mtime then
		if mode then
			set(R, 'mode', mode)
			f[#f + 1] = 'mode'
			f[#f + 1] = mode
		end
		if uid then
			set(R, 'uid', uid)
			f[#f + 1] = 'uid'
			f[#f + 1] = uid
		end
		if gid then
			set(R, 'gid', gid)
			f[#f + 1] = 'gid'
			f[#f + 1] = gid
		end
		if atime then
			set(R, 'atime', atime)
			f[#f + 1] = 'atime'
			f[#f + 1] = atime
		end
		if mtime then
			set(R, 'mtime', mtime)
			f[#f + 1] = 'mtime'
			f[#f + 1] = mtime
		end
		set(R, 'ctime', ctx.ns)
		f[#f + 1] = 'ctime'
		f[#f + 1] = ctx.ns
	end
	if ttl > 0 then
		local deadline = ctx.now + ttl
		set(R, 'deadline', deadline)
		wr(ctx, 'zset', 'ZADD', tkey(T, 'due'), deadline,
			(kind == 'parent' and 'p:' or 's:') .. ino)
		f[#f + 1] = 'deadline'
		f[#f + 1] = deadline
	end
	tlog(ctx, T, op, nlines, f)
	return finish(ctx, ok(ctx))
end

-- sfs_set_ttl and sfs_renew (do_lease).
local function lease(keys, args, is_set)
	local ctx, early = begin(keys, args, 'tenant')
	if not ctx then return early end
	local T = ctx.T
	local kind, ino = args[4], ino_arg(args[5])
	local ttl_arg = 0
	if is_set then ttl_arg = unum(args[6]) end
	if (kind ~= 'parent' and kind ~= 'child') or not ino or not ttl_arg or
		ttl_arg > DURATION_MAX_MS then
		return finish(ctx, fail(ctx, 'EINVAL'))
	end
	local R = node_rec(ctx, T, kind, ino)
	local ttl = is_set and ttl_arg or num(R, 'ttl')
	if gone(ctx, R) then return finish(ctx, refuse(ctx, 'ESTALE')) end
	if not is_set and ttl == 0 then
		return finish(ctx, ok(ctx, 0)) -- no lease to renew: a plain touch
	end
	if ttl > 0 and ctx.now > CLOCK_MAX_MS then return finish(ctx, fail(ctx, 'EINVAL')) end
	if draining(ctx, T) then return finish(ctx, refuse(ctx, 'EROFS')) end
	local deadline = ttl > 0 and ctx.now + ttl or 0
	local member = (kind == 'parent' and 'p:' or 's:') .. ino
	set(R, 'ttl', ttl)
	set(R, 'deadline', deadline)
	if deadline > 0 then
		wr(ctx, 'zset', 'ZADD', tkey(T, 'due'), deadline, member)
	else
		wr(ctx, 'zset', 'ZREM', tkey(T, 'due'), member)
	end
	tlog(ctx, T, is_set and 'ttl' or 'renew', 0, { 'kind', kind, 'ino', ino,
		'ttl', ttl, 'deadline', deadline })
	return finish(ctx, ok(ctx, deadline))
end

local function fn_set_ttl(keys, args) return lease(keys, args, true) end
local function fn_renew(keys, args) return lease(keys, args, false) end

-- sfs_set_child_ttl (store_set_child_ttl).
local function fn_set_child_ttl(keys, args)
	local ctx, early = begin(keys, args, 'tenant')
	if not ctx then return early end
	local T = ctx.T
	local pino, ttl = ino_arg(args[4]), unum(args[5])
	if not (pino and ttl) or ttl > DURATION_MAX_MS then
		return finish(ctx, fail(ctx, 'EINVAL'))
	end
	local P = parent_rec(ctx, T, pino)
	if gone(ctx, P) then return finish(ctx, fail(ctx, 'ESTALE')) end
	set(P, 'child_ttl', ttl)
	tlog(ctx, T, 'child_ttl', 0, { 'ino', pino, 'ttl', ttl })
	return finish(ctx, ok(ctx))
end

-- The scope of a function that takes one key (the store) or two (a tenant).
local function scope_of(keys) return #keys >= 2 and 'tenant' or 'root' end

-- sfs_expire (store_expire, then the drains that are due).  A tenant's
-- call settles the tenant's drain, the store's call the store's: a mount
-- calls each tenant's, then the store's, so every lease that is due ends
-- as an expiry before a drain of the store clears what is left, as in
-- the embedded store (leases, tombstones, then drains).
local function fn_expire(keys, args)
	local ctx, early = begin(keys, args, scope_of(keys))
	if not ctx then return early end
	local T = ctx.T
	local budget = unum(args[4] or '')
	if not budget or budget < 1 then return finish(ctx, fail(ctx, 'EINVAL')) end
	local done = 0
	if T and T.live then done = leases_expire(ctx, T, budget) end
	local aged = tombs_reap(ctx, budget)
	if T then
		if T.live and drain_due(ctx, T) then drain_clear_tenant(ctx, T, false) end
	else
		drains_settle(ctx, nil)
	end
	return finish(ctx, ok(ctx, done, aged))
end

-- Start a drain of @T (nil: the store); a running one is left as it is.
local function drain_start(ctx, T)
	local r = T or ctx.M
	if state_of(r) ~= 'ready' then return end
	local deadline = ctx.now + ctx.lim.drain_window_ms
	set(r, 'state', 'draining')
	set(r, 'drain_deadline', deadline)
	if T then
		tlog(ctx, T, 'drain', 1, { 'deadline', deadline })
	else
		rlog(ctx, 'drain', { 'deadline', deadline })
	end
end

-- How far the drain of @T's scope is: the further of its own and the
-- store's (store_drain_state).
local function scope_state(ctx, T)
	local ms = state_of(ctx.M)
	if T and T.live and STATE_RANK[state_of(T)] > STATE_RANK[ms] then
		return state_of(T)
	end
	return ms
end

-- sfs_drain (store_drain) and sfs_drain_now (store_drain_now).
local function drain(keys, args, now)
	local ctx, early = begin(keys, args, scope_of(keys))
	if not ctx then return early end
	local T = ctx.T
	local cred, good = nil, true
	if not now then cred, good = cred_parse(args[4], args[5], args[6]) end
	if not good then return finish(ctx, fail(ctx, 'EINVAL')) end
	if T and not T.live then return finish(ctx, fail(ctx, 'ESTALE')) end
	-- A tenant's clear removes what its cleanup would: the drain starts
	-- only for who could do that by hand (store_drain_as); one that runs
	-- already is not judged again.
	if T and cred and cred.uid ~= 0 and state_of(T) == 'ready' and
		not may_clear_tenant(ctx, T, cred) then
		return finish(ctx, fail(ctx, 'EACCES'))
	end
	drain_start(ctx, T)
	if now then
		-- Leases past their deadline go first (store_drain_state), then
		-- the scope is cleared at once.
		local ts = T and { T } or tenants_in_order(ctx)
		for _, t in ipairs(ts) do leases_expire(ctx, t, 4096) end
		drains_settle(ctx, T)
		if T then
			if T.live and state_of(T) == 'draining' then
				drain_clear_tenant(ctx, T, false)
			end
		elseif state_of(ctx.M) == 'draining' then
			drain_clear_store(ctx)
		end
	else
		if T then
			if drain_due(ctx, T) then drain_clear_tenant(ctx, T, false) end
		elseif drain_due(ctx, nil) then
			drain_clear_store(ctx)
		end
	end
	return finish(ctx, ok(ctx, scope_state(ctx, T)))
end

local function fn_drain(keys, args) return drain(keys, args, false) end
local function fn_drain_now(keys, args) return drain(keys, args, true) end

-- sfs_clock_advance (fs_clock_advance, -o testclock).
local function fn_clock_advance(keys, args)
	local ctx, early = begin(keys, args, 'root')
	if not ctx then return early end
	local ms = unum(args[4] or '')
	if ctx.lim.testclock ~= 1 then return finish(ctx, fail(ctx, 'EPERM')) end
	if not ms or ms > DURATION_MAX_MS or num(ctx.M, 'clock_ms') + ms > CLOCK_MAX_MS then
		return finish(ctx, fail(ctx, 'EINVAL'))
	end
	add(ctx.M, 'clock_ms', ms)
	ctx.now = num(ctx.M, 'clock_ms')
	rlog(ctx, 'clock', { 'clock_ms', num(ctx.M, 'clock_ms') })
	return finish(ctx, ok(ctx, num(ctx.M, 'clock_ms')))
end

-- Read-only functions ------------------------------------------------------------------

local function last_id(key)
	local r = redis.call('XREVRANGE', key, '+', '-', 'COUNT', 1)
	return r[1] and r[1][1] or '0-0'
end

-- sfs_dump: see the essay.
local function fn_dump(keys, args)
	local ctx, early = begin(keys, args, 'read')
	if not ctx then return early end
	local M = ctx.M
	if #keys < 2 then
		return { 'OK', ctx.now, num(M, 'seq'), last_id(ctx.root .. ':log'),
			redis.call('HGETALL', M.key),
			redis.call('HGETALL', ctx.root .. ':tenants') }
	end
	local T = tenant_rec(ctx, keys[2])
	if not T.live then return { 'ESTALE', ctx.now, 0 } end
	local parents, states, seen = {}, {}, {}
	for _, P in ipairs(parents_in_order(ctx, T)) do
		local links = redis.call('HGETALL', nkey(T, 'l', P.ino))
		parents[#parents + 1] = { P.ino, redis.call('HGETALL', P.key), links }
		for i = 2, #links, 2 do
			local sino = links[i]
			if not seen[sino] then
				seen[sino] = true
				states[#states + 1] = { tonumber(sino),
					redis.call('HGETALL', nkey(T, 's', sino)) }
			end
		end
	end
	return { 'OK', ctx.now, num(T, 'seq'), last_id(tkey(T, 'log')),
		redis.call('HGETALL', T.key),
		parents, states, redis.call('HGETALL', tkey(T, 'tombs')) }
end

local STAT_GAUGES = { 'tenants', 'parents', 'children', 'links', 'tombstones', 'bytes' }
local STAT_COUNTERS = { 'admissions', 'removals', 'expiries', 'joins', 'leaves',
	'refused_capacity', 'refused_quota', 'refused_payload', 'refused_draining',
	'refused_exists', 'refused_stale', 'refused_conflict', 'refused_gone' }

-- sfs_stats: see the essay.
local function fn_stats(keys, args)
	local ctx, early = begin(keys, args, 'read')
	if not ctx then return early end
	local M, T = ctx.M, nil
	-- Every counter is asked for: read them all at once.
	local all = redis.call('HGETALL', M.key)
	for i = 1, #all, 2 do M.h[all[i]] = all[i + 1] end
	if #keys >= 2 then
		T = tenant_rec(ctx, keys[2])
		if not T.live then return { 'ESTALE', ctx.now, 0 } end
	end
	local st = scope_state(ctx, T)
	local deadline = num(M, 'drain_deadline')
	if T and str(T, 'state') == 'draining' and
		(str(M, 'state') ~= 'draining' or num(T, 'drain_deadline') < deadline) then
		deadline = num(T, 'drain_deadline')
	end
	local left = 0
	if st == 'draining' and deadline > ctx.now then left = deadline - ctx.now end
	local out = { 'OK', ctx.now, T and num(T, 'seq') or num(M, 'seq'),
		'instance', str(M, 'instance'), 'state', st, 'drain_ms_left', left,
		'uptime_ms', ctx.real_ms - num(M, 'created_ms') }
	if T then
		out[#out + 1] = 'tenant'
		out[#out + 1] = str(T, 'name')
	end
	for _, g in ipairs(STAT_GAUGES) do
		out[#out + 1] = g
		out[#out + 1] = (T and g == 'tenants') and 1 or num(T or M, g)
	end
	for _, l in ipairs(LIMITS) do
		out[#out + 1] = l[1]
		out[#out + 1] = ctx.lim[l[1]]
	end
	for _, c in ipairs(STAT_COUNTERS) do
		out[#out + 1] = c
		out[#out + 1] = num(M, c)
	end
	return out
end

-- sfs_sync: the seqs a mount must have applied to be as fresh as the store.
local function fn_sync(keys, args)
	local ctx, early = begin(keys, args, 'read')
	if not ctx then return early end
	local out = { 'OK', ctx.now, num(ctx.M, 'seq') }
	for i = 2, #keys do
		local s = rd(ctx, 'HGET', keys[i], 'seq')
		out[#out + 1] = s and (unum(s) or damaged(keys[i])) or -1
	end
	return out
end

-- Registration -----------------------------------------------------------------------------

-- A call that finds damage answers EDAMAGED KEY (see "Damage", above),
-- having written nothing; any other error is a bug and stays an error.
local function guarded(fn)
	return function(keys, args)
		cur_ctx = nil
		local good, out = pcall(fn, keys, args)
		if good then return out end
		if type(out) == 'table' and out.damaged then
			return { 'EDAMAGED', cur_ctx and cur_ctx.now or 0, 0, out.damaged }
		end
		error(out, 0)
	end
end

local function reg(name, fn, ro)
	redis.register_function{ function_name = name, callback = guarded(fn),
		flags = ro and { 'no-writes' } or {} }
end

reg('sfs_version', fn_version, true)
reg('sfs_fence', fn_fence)
reg('sfs_init', fn_init)
reg('sfs_mkdir_tenant', fn_mkdir_tenant)
reg('sfs_rmdir_tenant', fn_rmdir_tenant)
reg('sfs_join', fn_join)
reg('sfs_leave', fn_leave)
reg('sfs_depart', fn_depart)
reg('sfs_create', fn_create)
reg('sfs_unlink', fn_unlink)
reg('sfs_link', fn_link)
reg('sfs_rename', fn_rename)
reg('sfs_publish', fn_publish)
reg('sfs_setattr', fn_setattr)
reg('sfs_set_ttl', fn_set_ttl)
reg('sfs_set_child_ttl', fn_set_child_ttl)
reg('sfs_renew', fn_renew)
reg('sfs_expire', fn_expire)
reg('sfs_drain', fn_drain)
reg('sfs_drain_now', fn_drain_now)
reg('sfs_clock_advance', fn_clock_advance)
reg('sfs_dump', fn_dump, true)
reg('sfs_stats', fn_stats, true)
reg('sfs_sync', fn_sync, true)
