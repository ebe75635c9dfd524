/*
 * clr_abi.h - the CoreCLR profiling ABI, declared by hand in C for Linux x86-64.
 *
 * Every type width, slot order, IID and constant here follows the runtime's corprof.idl / cor.h /
 * pal_mstypes.h (dotnet/runtime, src/coreclr/inc and src/coreclr/pal). On Linux the PAL makes every COM
 * method a plain SysV function, `this` first. LONG/ULONG/DWORD/BOOL/HRESULT are 32-bit, WCHAR is
 * 16-bit, GUID is 16 bytes. tests/unit/test_abi.c checks sizes and slot offsets.
 */
#ifndef CLR_ABI_H
#define CLR_ABI_H

#include <stddef.h>
#include <stdint.h>

typedef int32_t HRESULT;
typedef uint32_t ULONG;
typedef uint32_t ULONG32;
typedef uint32_t DWORD;
typedef uint32_t UINT32;
typedef int32_t BOOL;
typedef uint16_t USHORT;
typedef uint16_t WCHAR;
typedef uint8_t BYTE;
typedef uint8_t UINT8;
typedef uint64_t UINT64;
typedef uintptr_t UINT_PTR;
typedef size_t SIZE_T;
typedef uint32_t mdToken;
typedef uint32_t mdTypeDef;
typedef uint32_t mdTypeRef;
typedef uint32_t mdMethodDef;
typedef uint32_t CorElementType;
typedef uintptr_t ClassID;
typedef uintptr_t FunctionID;
typedef uintptr_t ModuleID;
typedef uintptr_t ObjectID;
typedef uintptr_t ThreadID;
typedef uintptr_t AssemblyID;
typedef uintptr_t AppDomainID;
typedef uintptr_t EVENTPIPE_PROVIDER;
typedef uint64_t EVENTPIPE_SESSION;
typedef void *ObjectHandleID;
typedef void *HCORENUM;
typedef int32_t COR_PRF_HANDLE_TYPE;

typedef struct GUID {
    uint32_t Data1;
    uint16_t Data2;
    uint16_t Data3;
    uint8_t Data4[8];
} GUID;

typedef const GUID *REFIID;

#define S_OK                               ((HRESULT)0)
#define S_FALSE                            ((HRESULT)1)
#define E_NOTIMPL                          ((HRESULT)0x80004001u)
#define E_NOINTERFACE                      ((HRESULT)0x80004002u)
#define E_POINTER                          ((HRESULT)0x80004003u)
#define E_FAIL                             ((HRESULT)0x80004005u)
#define CLASS_E_NOAGGREGATION              ((HRESULT)0x80040110u)
#define CLASS_E_CLASSNOTAVAILABLE          ((HRESULT)0x80040111u)
#define CORPROF_E_SUSPENSION_IN_PROGRESS   ((HRESULT)0x80131388u)
#define CORPROF_E_RUNTIME_UNINITIALIZED    ((HRESULT)0x80131371u)
#define CORPROF_E_PROFILER_CANCEL_ACTIVATION ((HRESULT)0x80131375u)
#define CORPROF_E_STACKSNAPSHOT_ABORTED    ((HRESULT)0x80131361u)

/* COR_PRF_MONITOR (low word of the event mask). */
#define COR_PRF_MONITOR_MODULE_LOADS       0x4u
#define COR_PRF_MONITOR_JIT_COMPILATION    0x20u
#define COR_PRF_MONITOR_EXCEPTIONS         0x40u
#define COR_PRF_MONITOR_GC                 0x80u
#define COR_PRF_MONITOR_OBJECT_ALLOCATED   0x100u
#define COR_PRF_MONITOR_THREADS            0x200u
#define COR_PRF_MONITOR_SUSPENDS           0x10000u
#define COR_PRF_ENABLE_OBJECT_ALLOCATED    0x800000u
#define COR_PRF_ENABLE_STACK_SNAPSHOT      0x10000000u
/* COR_PRF_MODULE_FLAGS (GetModuleInfo2). */
#define COR_PRF_MODULE_COLLECTIBLE         0x8u
/* COR_PRF_HIGH_MONITOR (second word). */
#define COR_PRF_HIGH_MONITOR_DYNAMIC_FUNCTION_UNLOADS 0x4u
#define COR_PRF_HIGH_BASIC_GC              0x10u
#define COR_PRF_HIGH_MONITOR_EVENT_PIPE    0x80u

#define COR_PRF_HANDLE_TYPE_WEAK           1
#define COR_PRF_SNAPSHOT_DEFAULT           0u

/* EventPipe levels. */
#define EP_LEVEL_CRITICAL      1u
#define EP_LEVEL_ERROR         2u
#define EP_LEVEL_INFORMATIONAL 4u
#define EP_LEVEL_VERBOSE       5u

typedef struct COR_PRF_EVENTPIPE_PROVIDER_CONFIG {
    const WCHAR *providerName;
    UINT64 keywords;
    UINT32 loggingLevel;
    const WCHAR *filterData;
} COR_PRF_EVENTPIPE_PROVIDER_CONFIG;

/* GetGenerationBounds: one range of a GC generation (COR_PRF_GC_GENERATION is an int enum). */
typedef struct COR_PRF_GC_GENERATION_RANGE {
    int32_t generation;
    ObjectID rangeStart;
    UINT_PTR rangeLength;
    UINT_PTR rangeLengthReserved;
} COR_PRF_GC_GENERATION_RANGE;

/* GetClassLayout: one instance field (its FieldDef token) and its offset from the object's start,
 * the MethodTable pointer included (corprof.idl). */
typedef struct COR_FIELD_OFFSET {
    mdToken ridOfField;
    ULONG ulOffset;
} COR_FIELD_OFFSET;

/* GetCodeInfo4: one contiguous range of a method's native code. */
typedef struct COR_PRF_CODE_INFO {
    UINT_PTR startAddress;
    SIZE_T size;
} COR_PRF_CODE_INFO;

/* GetILToNativeMapping3: one range of native code and the IL offset it was compiled from
 * (cordebuginfo.h: ilOffset (ULONG32)-1 no mapping, -2 prologue, -3 epilogue). Code the JIT
 * inlined carries the IL offset of its call site in the method being compiled. */
typedef struct COR_DEBUG_IL_TO_NATIVE_MAP {
    ULONG32 ilOffset;
    ULONG32 nativeStartOffset;
    ULONG32 nativeEndOffset;
} COR_DEBUG_IL_TO_NATIVE_MAP;

typedef HRESULT (*StackSnapshotCallback)(FunctionID fn, UINT_PTR ip, UINT_PTR frame_info,
                                         ULONG32 ctx_size, BYTE *ctx, void *data);
typedef BOOL (*ObjectCallback)(ObjectID obj, void *state);
typedef BOOL (*ObjectReferenceCallback)(ObjectID root, ObjectID *ref, void *data);

/* Enumerators share one shape: IUnknown, Skip, Reset, Clone, GetCount, Next. */
typedef struct ICorProfilerThreadEnum ICorProfilerThreadEnum;
typedef struct ICorProfilerThreadEnumVtbl {
    HRESULT (*QueryInterface)(ICorProfilerThreadEnum *self, REFIID riid, void **ppv);
    ULONG (*AddRef)(ICorProfilerThreadEnum *self);
    ULONG (*Release)(ICorProfilerThreadEnum *self);
    HRESULT (*Skip)(ICorProfilerThreadEnum *self, ULONG n);
    HRESULT (*Reset)(ICorProfilerThreadEnum *self);
    HRESULT (*Clone)(ICorProfilerThreadEnum *self, ICorProfilerThreadEnum **out);
    HRESULT (*GetCount)(ICorProfilerThreadEnum *self, ULONG *n);
    HRESULT (*Next)(ICorProfilerThreadEnum *self, ULONG n, ThreadID *ids, ULONG *fetched);
} ICorProfilerThreadEnumVtbl;
struct ICorProfilerThreadEnum {
    const ICorProfilerThreadEnumVtbl *vt;
};
typedef struct ICorProfilerModuleEnum ICorProfilerModuleEnum;
typedef struct ICorProfilerModuleEnumVtbl {
    HRESULT (*QueryInterface)(ICorProfilerModuleEnum *self, REFIID riid, void **ppv);
    ULONG (*AddRef)(ICorProfilerModuleEnum *self);
    ULONG (*Release)(ICorProfilerModuleEnum *self);
    HRESULT (*Skip)(ICorProfilerModuleEnum *self, ULONG n);
    HRESULT (*Reset)(ICorProfilerModuleEnum *self);
    HRESULT (*Clone)(ICorProfilerModuleEnum *self, ICorProfilerModuleEnum **out);
    HRESULT (*GetCount)(ICorProfilerModuleEnum *self, ULONG *n);
    HRESULT (*Next)(ICorProfilerModuleEnum *self, ULONG n, ModuleID *ids, ULONG *fetched);
} ICorProfilerModuleEnumVtbl;
struct ICorProfilerModuleEnum {
    const ICorProfilerModuleEnumVtbl *vt;
};

typedef struct ICorProfilerInfo15Vtbl {
    /*   0 */ HRESULT (*QueryInterface)(void *self, REFIID riid, void **ppv);
    /*   1 */ ULONG (*AddRef)(void *self);
    /*   2 */ ULONG (*Release)(void *self);
    /*   3 */ HRESULT (*GetClassFromObject)(void *self, ObjectID obj, ClassID *cls);
    /*   4 */ HRESULT (*GetClassFromToken)(void *self, ModuleID mod, mdTypeDef td, ClassID *cls);
    /*   5 */ void *GetCodeInfo;
    /*   6 */ void *GetEventMask;
    /*   7 */ HRESULT (*GetFunctionFromIP)(void *self, const BYTE *ip, FunctionID *fn);
    /*   8 */ void *GetFunctionFromToken;
    /*   9 */ void *GetHandleFromThread;
    /*  10 */ void *GetObjectSize;
    /*  11 */ HRESULT (*IsArrayClass)(void *self, ClassID cls, CorElementType *elem, ClassID *base, ULONG *rank);
    /*  12 */ HRESULT (*GetThreadInfo)(void *self, ThreadID tid, DWORD *os_tid);
    /*  13 */ HRESULT (*GetCurrentThreadID)(void *self, ThreadID *tid);
    /*  14 */ HRESULT (*GetClassIDInfo)(void *self, ClassID cls, ModuleID *mod, mdTypeDef *td);
    /*  15 */ HRESULT (*GetFunctionInfo)(void *self, FunctionID fn, ClassID *cls, ModuleID *mod, mdToken *tok);
    /*  16 */ void *SetEventMask;
    /*  17 */ void *SetEnterLeaveFunctionHooks;
    /*  18 */ void *SetFunctionIDMapper;
    /*  19 */ void *GetTokenAndMetaDataFromFunction;
    /*  20 */ HRESULT (*GetModuleInfo)(void *self, ModuleID mod, const BYTE **base, ULONG cch, ULONG *pcch, WCHAR *name, AssemblyID *asm_id);
    /*  21 */ HRESULT (*GetModuleMetaData)(void *self, ModuleID mod, DWORD flags, REFIID riid, void **out);
    /*  22 */ HRESULT (*GetILFunctionBody)(void *self, ModuleID mod, mdToken method, const BYTE **header, ULONG *size);
    /*  23 */ void *GetILFunctionBodyAllocator;
    /*  24 */ void *SetILFunctionBody;
    /*  25 */ void *GetAppDomainInfo;
    /*  26 */ void *GetAssemblyInfo;
    /*  27 */ void *SetFunctionReJIT;
    /*  28 */ HRESULT (*ForceGC)(void *self);
    /*  29 */ void *SetILInstrumentedCodeMap;
    /*  30 */ void *GetInprocInspectionInterface;
    /*  31 */ void *GetInprocInspectionIThisThread;
    /*  32 */ void *GetThreadContext;
    /*  33 */ void *BeginInprocDebugging;
    /*  34 */ void *EndInprocDebugging;
    /*  35 */ void *GetILToNativeMapping;
    /*  36 */ HRESULT (*DoStackSnapshot)(void *self, ThreadID thread, StackSnapshotCallback cb, ULONG32 flags, void *data, BYTE *ctx, ULONG32 ctx_size);
    /*  37 */ void *SetEnterLeaveFunctionHooks2;
    /*  38 */ HRESULT (*GetFunctionInfo2)(void *self, FunctionID fn, UINT_PTR frame, ClassID *cls, ModuleID *mod, mdToken *tok, ULONG32 cargs, ULONG32 *pcargs, ClassID *args);
    /*  39 */ void *GetStringLayout;
    /*  40 */ HRESULT (*GetClassLayout)(void *self, ClassID cls, COR_FIELD_OFFSET *offsets, ULONG cap, ULONG *count, ULONG *size);
    /*  41 */ HRESULT (*GetClassIDInfo2)(void *self, ClassID cls, ModuleID *mod, mdTypeDef *td, ClassID *parent, ULONG32 cargs, ULONG32 *pcargs, ClassID *args);
    /*  42 */ HRESULT (*GetCodeInfo2)(void *self, FunctionID fn, ULONG32 cap, ULONG32 *count, COR_PRF_CODE_INFO *infos);
    /*  43 */ void *GetClassFromTokenAndTypeArgs;
    /*  44 */ void *GetFunctionFromTokenAndTypeArgs;
    /*  45 */ void *EnumModuleFrozenObjects;
    /*  46 */ HRESULT (*GetArrayObjectInfo)(void *self, ObjectID obj, ULONG32 cdims, ULONG32 *dim_sizes, int *dim_lower, BYTE **data);
    /*  47 */ void *GetBoxClassLayout;
    /*  48 */ void *GetThreadAppDomain;
    /*  49 */ void *GetRVAStaticAddress;
    /*  50 */ void *GetAppDomainStaticAddress;
    /*  51 */ void *GetThreadStaticAddress;
    /*  52 */ void *GetContextStaticAddress;
    /*  53 */ void *GetStaticFieldInfo;
    /*  54 */ HRESULT (*GetGenerationBounds)(void *self, ULONG cap, ULONG *count, COR_PRF_GC_GENERATION_RANGE *ranges);
    /*  55 */ void *GetObjectGeneration;
    /*  56 */ void *GetNotifiedExceptionClauseInfo;
    /*  57 */ void *EnumJITedFunctions;
    /*  58 */ void *RequestProfilerDetach;
    /*  59 */ void *SetFunctionIDMapper2;
    /*  60 */ HRESULT (*GetStringLayout2)(void *self, ULONG *len_off, ULONG *buf_off);
    /*  61 */ void *SetEnterLeaveFunctionHooks3;
    /*  62 */ void *SetEnterLeaveFunctionHooks3WithInfo;
    /*  63 */ void *GetFunctionEnter3Info;
    /*  64 */ void *GetFunctionLeave3Info;
    /*  65 */ void *GetFunctionTailcall3Info;
    /*  66 */ HRESULT (*EnumModules)(void *self, ICorProfilerModuleEnum **out);
    /*  67 */ HRESULT (*GetRuntimeInformation)(void *self, USHORT *clr_id, DWORD *rt_type, USHORT *major, USHORT *minor, USHORT *build, USHORT *qfe, ULONG cch, ULONG *pcch, WCHAR *ver);
    /*  68 */ void *GetThreadStaticAddress2;
    /*  69 */ void *GetAppDomainsContainingModule;
    /*  70 */ HRESULT (*GetModuleInfo2)(void *self, ModuleID mod, const BYTE **base, ULONG cch, ULONG *pcch, WCHAR *name, AssemblyID *asm_id, DWORD *flags);
    /*  71 */ HRESULT (*EnumThreads)(void *self, ICorProfilerThreadEnum **out);
    /*  72 */ HRESULT (*InitializeCurrentThread)(void *self);
    /*  73 */ void *RequestReJIT;
    /*  74 */ void *RequestRevert;
    /*  75 */ void *GetCodeInfo3;
    /*  76 */ HRESULT (*GetFunctionFromIP2)(void *self, const BYTE *ip, FunctionID *fn, UINT_PTR *rejit);
    /*  77 */ void *GetReJITIDs;
    /*  78 */ void *GetILToNativeMapping2;
    /*  79 */ void *EnumJITedFunctions2;
    /*  80 */ HRESULT (*GetObjectSize2)(void *self, ObjectID obj, SIZE_T *size);
    /*  81 */ HRESULT (*GetEventMask2)(void *self, DWORD *lo, DWORD *hi);
    /*  82 */ HRESULT (*SetEventMask2)(void *self, DWORD lo, DWORD hi);
    /*  83 */ void *EnumNgenModuleMethodsInliningThisMethod;
    /*  84 */ void *ApplyMetaData;
    /*  85 */ void *GetInMemorySymbolsLength;
    /*  86 */ void *ReadInMemorySymbols;
    /*  87 */ HRESULT (*IsFunctionDynamic)(void *self, FunctionID fn, BOOL *dyn);
    /*  88 */ void *GetFunctionFromIP3;
    /*  89 */ HRESULT (*GetDynamicFunctionInfo)(void *self, FunctionID fn, ModuleID *mod, const BYTE **sig, ULONG *cbsig, ULONG cch, ULONG *pcch, WCHAR *name);
    /*  90 */ HRESULT (*GetNativeCodeStartAddresses)(void *self, FunctionID fn, UINT_PTR rejit, ULONG32 cap, ULONG32 *count, UINT_PTR *starts);
    /*  91 */ HRESULT (*GetILToNativeMapping3)(void *self, UINT_PTR start, ULONG32 cap, ULONG32 *count, COR_DEBUG_IL_TO_NATIVE_MAP *map);
    /*  92 */ HRESULT (*GetCodeInfo4)(void *self, UINT_PTR start, ULONG32 cap, ULONG32 *count, COR_PRF_CODE_INFO *infos);
    /*  93 */ HRESULT (*EnumerateObjectReferences)(void *self, ObjectID obj, ObjectReferenceCallback cb, void *data);
    /*  94 */ void *IsFrozenObject;
    /*  95 */ void *GetLOHObjectSizeThreshold;
    /*  96 */ void *RequestReJITWithInliners;
    /*  97 */ HRESULT (*SuspendRuntime)(void *self);
    /*  98 */ HRESULT (*ResumeRuntime)(void *self);
    /*  99 */ void *GetEnvironmentVariable;
    /* 100 */ void *SetEnvironmentVariable;
    /* 101 */ HRESULT (*EventPipeStartSession)(void *self, UINT32 n, COR_PRF_EVENTPIPE_PROVIDER_CONFIG *cfgs, BOOL rundown, EVENTPIPE_SESSION *session);
    /* 102 */ HRESULT (*EventPipeAddProviderToSession)(void *self, EVENTPIPE_SESSION session, COR_PRF_EVENTPIPE_PROVIDER_CONFIG cfg);
    /* 103 */ HRESULT (*EventPipeStopSession)(void *self, EVENTPIPE_SESSION session);
    /* 104 */ void *EventPipeCreateProvider;
    /* 105 */ HRESULT (*EventPipeGetProviderInfo)(void *self, EVENTPIPE_PROVIDER provider, ULONG cch, ULONG *pcch, WCHAR *name);
    /* 106 */ void *EventPipeDefineEvent;
    /* 107 */ void *EventPipeWriteEvent;
    /* 108 */ HRESULT (*CreateHandle)(void *self, ObjectID obj, COR_PRF_HANDLE_TYPE type, ObjectHandleID *h);
    /* 109 */ HRESULT (*DestroyHandle)(void *self, ObjectHandleID h);
    /* 110 */ HRESULT (*GetObjectIDFromHandle)(void *self, ObjectHandleID h, ObjectID *obj);
    /* 111 */ void *EnumerateNonGCObjects;
    /* 112 */ void *GetNonGCHeapBounds;
    /* 113 */ void *EventPipeCreateProvider2;
    /* 114 */ HRESULT (*EnumerateGCHeapObjects)(void *self, ObjectCallback cb, void *state);
} ICorProfilerInfo15Vtbl;

typedef struct IMetaDataImportVtbl {
    /*   0 */ HRESULT (*QueryInterface)(void *self, REFIID riid, void **ppv);
    /*   1 */ ULONG (*AddRef)(void *self);
    /*   2 */ ULONG (*Release)(void *self);
    /*   3 */ void (*CloseEnum)(void *self, HCORENUM e);
    /*   4 */ void *CountEnum;
    /*   5 */ void *ResetEnum;
    /*   6 */ void *EnumTypeDefs;
    /*   7 */ void *EnumInterfaceImpls;
    /*   8 */ void *EnumTypeRefs;
    /*   9 */ HRESULT (*FindTypeDefByName)(void *self, const WCHAR *name, mdToken enclosing, mdTypeDef *td);
    /*  10 */ void *GetScopeProps;
    /*  11 */ void *GetModuleFromScope;
    /*  12 */ HRESULT (*GetTypeDefProps)(void *self, mdTypeDef td, WCHAR *name, ULONG cch, ULONG *pcch, DWORD *flags, mdToken *extends);
    /*  13 */ void *GetInterfaceImplProps;
    /*  14 */ HRESULT (*GetTypeRefProps)(void *self, mdTypeRef tr, mdToken *scope, WCHAR *name, ULONG cch, ULONG *pcch);
    /*  15 */ void *ResolveTypeRef;
    /*  16 */ void *EnumMembers;
    /*  17 */ void *EnumMembersWithName;
    /*  18 */ void *EnumMethods;
    /*  19 */ void *EnumMethodsWithName;
    /*  20 */ void *EnumFields;
    /*  21 */ void *EnumFieldsWithName;
    /*  22 */ void *EnumParams;
    /*  23 */ void *EnumMemberRefs;
    /*  24 */ void *EnumMethodImpls;
    /*  25 */ void *EnumPermissionSets;
    /*  26 */ void *FindMember;
    /*  27 */ void *FindMethod;
    /*  28 */ void *FindField;
    /*  29 */ void *FindMemberRef;
    /*  30 */ HRESULT (*GetMethodProps)(void *self, mdMethodDef mb, mdTypeDef *cls, WCHAR *name, ULONG cch, ULONG *pcch, DWORD *attr, const BYTE **sig, ULONG *cbsig, ULONG *rva, DWORD *impl);
    /*  31 */ HRESULT (*GetMemberRefProps)(void *self, mdToken mr, mdToken *parent, WCHAR *name, ULONG cch, ULONG *pcch, const BYTE **sig, ULONG *cbsig);
    /*  32 */ void *EnumProperties;
    /*  33 */ void *EnumEvents;
    /*  34 */ void *GetEventProps;
    /*  35 */ void *EnumMethodSemantics;
    /*  36 */ void *GetMethodSemantics;
    /*  37 */ void *GetClassLayout;
    /*  38 */ void *GetFieldMarshal;
    /*  39 */ void *GetRVA;
    /*  40 */ void *GetPermissionSetProps;
    /*  41 */ void *GetSigFromToken;
    /*  42 */ void *GetModuleRefProps;
    /*  43 */ void *EnumModuleRefs;
    /*  44 */ void *GetTypeSpecFromToken;
    /*  45 */ void *GetNameFromToken;
    /*  46 */ void *EnumUnresolvedMethods;
    /*  47 */ void *GetUserString;
    /*  48 */ void *GetPinvokeMap;
    /*  49 */ void *EnumSignatures;
    /*  50 */ void *EnumTypeSpecs;
    /*  51 */ void *EnumUserStrings;
    /*  52 */ void *GetParamForMethodIndex;
    /*  53 */ void *EnumCustomAttributes;
    /*  54 */ void *GetCustomAttributeProps;
    /*  55 */ void *FindTypeRef;
    /*  56 */ void *GetMemberProps;
    /*  57 */ HRESULT (*GetFieldProps)(void *self, mdToken fd, mdTypeDef *cls, WCHAR *name, ULONG cch, ULONG *pcch, DWORD *attr, const BYTE **sig, ULONG *cbsig, DWORD *cplus_type, const void **value, ULONG *cch_value);
    /*  58 */ void *GetPropertyProps;
    /*  59 */ void *GetParamProps;
    /*  60 */ void *GetCustomAttributeByName;
    /*  61 */ void *IsValidToken;
    /*  62 */ HRESULT (*GetNestedClassProps)(void *self, mdTypeDef nested, mdTypeDef *enclosing);
    /*  63 */ void *GetNativeCallConvFromSig;
    /*  64 */ void *IsGlobal;
} IMetaDataImportVtbl;

/* Slot indices of ICorProfilerCallback11, for the static vtable and the layout test. */
enum clr_callback_slot {
    CB_QueryInterface = 0,
    CB_AddRef = 1,
    CB_Release = 2,
    CB_Initialize = 3,
    CB_Shutdown = 4,
    CB_AppDomainCreationStarted = 5,
    CB_AppDomainCreationFinished = 6,
    CB_AppDomainShutdownStarted = 7,
    CB_AppDomainShutdownFinished = 8,
    CB_AssemblyLoadStarted = 9,
    CB_AssemblyLoadFinished = 10,
    CB_AssemblyUnloadStarted = 11,
    CB_AssemblyUnloadFinished = 12,
    CB_ModuleLoadStarted = 13,
    CB_ModuleLoadFinished = 14,
    CB_ModuleUnloadStarted = 15,
    CB_ModuleUnloadFinished = 16,
    CB_ModuleAttachedToAssembly = 17,
    CB_ClassLoadStarted = 18,
    CB_ClassLoadFinished = 19,
    CB_ClassUnloadStarted = 20,
    CB_ClassUnloadFinished = 21,
    CB_FunctionUnloadStarted = 22,
    CB_JITCompilationStarted = 23,
    CB_JITCompilationFinished = 24,
    CB_JITCachedFunctionSearchStarted = 25,
    CB_JITCachedFunctionSearchFinished = 26,
    CB_JITFunctionPitched = 27,
    CB_JITInlining = 28,
    CB_ThreadCreated = 29,
    CB_ThreadDestroyed = 30,
    CB_ThreadAssignedToOSThread = 31,
    CB_RemotingClientInvocationStarted = 32,
    CB_RemotingClientSendingMessage = 33,
    CB_RemotingClientReceivingReply = 34,
    CB_RemotingClientInvocationFinished = 35,
    CB_RemotingServerReceivingMessage = 36,
    CB_RemotingServerInvocationStarted = 37,
    CB_RemotingServerInvocationReturned = 38,
    CB_RemotingServerSendingReply = 39,
    CB_UnmanagedToManagedTransition = 40,
    CB_ManagedToUnmanagedTransition = 41,
    CB_RuntimeSuspendStarted = 42,
    CB_RuntimeSuspendFinished = 43,
    CB_RuntimeSuspendAborted = 44,
    CB_RuntimeResumeStarted = 45,
    CB_RuntimeResumeFinished = 46,
    CB_RuntimeThreadSuspended = 47,
    CB_RuntimeThreadResumed = 48,
    CB_MovedReferences = 49,
    CB_ObjectAllocated = 50,
    CB_ObjectsAllocatedByClass = 51,
    CB_ObjectReferences = 52,
    CB_RootReferences = 53,
    CB_ExceptionThrown = 54,
    CB_ExceptionSearchFunctionEnter = 55,
    CB_ExceptionSearchFunctionLeave = 56,
    CB_ExceptionSearchFilterEnter = 57,
    CB_ExceptionSearchFilterLeave = 58,
    CB_ExceptionSearchCatcherFound = 59,
    CB_ExceptionOSHandlerEnter = 60,
    CB_ExceptionOSHandlerLeave = 61,
    CB_ExceptionUnwindFunctionEnter = 62,
    CB_ExceptionUnwindFunctionLeave = 63,
    CB_ExceptionUnwindFinallyEnter = 64,
    CB_ExceptionUnwindFinallyLeave = 65,
    CB_ExceptionCatcherEnter = 66,
    CB_ExceptionCatcherLeave = 67,
    CB_COMClassicVTableCreated = 68,
    CB_COMClassicVTableDestroyed = 69,
    CB_ExceptionCLRCatcherFound = 70,
    CB_ExceptionCLRCatcherExecute = 71,
    CB_ThreadNameChanged = 72,
    CB_GarbageCollectionStarted = 73,
    CB_SurvivingReferences = 74,
    CB_GarbageCollectionFinished = 75,
    CB_FinalizeableObjectQueued = 76,
    CB_RootReferences2 = 77,
    CB_HandleCreated = 78,
    CB_HandleDestroyed = 79,
    CB_InitializeForAttach = 80,
    CB_ProfilerAttachComplete = 81,
    CB_ProfilerDetachSucceeded = 82,
    CB_ReJITCompilationStarted = 83,
    CB_GetReJITParameters = 84,
    CB_ReJITCompilationFinished = 85,
    CB_ReJITError = 86,
    CB_MovedReferences2 = 87,
    CB_SurvivingReferences2 = 88,
    CB_ConditionalWeakTableElementReferences = 89,
    CB_GetAssemblyReferences = 90,
    CB_ModuleInMemorySymbolsUpdated = 91,
    CB_DynamicMethodJITCompilationStarted = 92,
    CB_DynamicMethodJITCompilationFinished = 93,
    CB_DynamicMethodUnloaded = 94,
    CB_EventPipeEventDelivered = 95,
    CB_EventPipeProviderCreated = 96,
    CB_LoadAsNotificationOnly = 97,
    CB_SLOT_COUNT = 98
};

typedef struct ICorProfilerInfo15 {
    const ICorProfilerInfo15Vtbl *vt;
} ICorProfilerInfo15;

typedef struct IMetaDataImport {
    const IMetaDataImportVtbl *vt;
} IMetaDataImport;

/* IMetaDataImport2 (cor.h): IMetaDataImport's slots, then these. */
typedef struct IMetaDataImport2Vtbl {
    IMetaDataImportVtbl base;
    /*  65 */ HRESULT (*EnumGenericParams)(void *self, HCORENUM *e, mdToken owner, mdToken *params, ULONG cmax, ULONG *pcount);
    /*  66 */ HRESULT (*GetGenericParamProps)(void *self, mdToken gp, ULONG *seq, DWORD *flags, mdToken *owner, DWORD *reserved, WCHAR *name, ULONG cch, ULONG *pcch);
    /*  67 */ HRESULT (*GetMethodSpecProps)(void *self, mdToken spec, mdToken *parent, const BYTE **sig, ULONG *cbsig);
} IMetaDataImport2Vtbl;
_Static_assert(offsetof(IMetaDataImport2Vtbl, EnumGenericParams) == 65 * sizeof(void *),
               "IMetaDataImport2 continues IMetaDataImport's 65 slots");

typedef struct IMetaDataImport2 {
    const IMetaDataImport2Vtbl *vt;
} IMetaDataImport2;

/* Interface IDs (corprof.idl, cor.h, COM). */
extern const GUID IID_IUnknown;
extern const GUID IID_IClassFactory;
extern const GUID IID_ICorProfilerCallback[12]; /* [1]..[11]; [0] unused */
extern const GUID IID_ICorProfilerInfo[16];     /* [1]..[15]; [0] unused */
extern const GUID IID_IMetaDataImport;
extern const GUID IID_IMetaDataImport2;
extern const GUID CLSID_clrscope;

int clr_guid_eq(const GUID *a, const GUID *b);

#endif
